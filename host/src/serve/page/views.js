// An image view: the server's PNG of a result (drawn by the previews' colour maps and
// scaling, one PNG pixel per data pixel) scaled up to fit a square box, with an overlay
// canvas for detectors, markers and the pointer.

const BOX = 384;

export class ImageView {
  constructor(container) {
    this.container = container;
    this.image = document.createElement("canvas");
    this.image.className = "image";
    this.overlay = document.createElement("canvas");
    this.overlay.className = "overlay";
    container.append(this.image, this.overlay);
    this.height = 0;
    this.width = 0;
    this.scale = 1;
    this.shown = 0; // sequence number of the newest image drawn
    this.requested = 0;
    this.drawOverlay = () => {};
  }

  /** Size the view for `height` x `width` data pixels (clears it). */
  setShape(height, width) {
    this.height = height;
    this.width = width;
    this.scale = Math.max(Math.min(BOX / width, BOX / height), 1e-6);
    this.image.width = width;
    this.image.height = height;
    const cssWidth = Math.round(width * this.scale);
    const cssHeight = Math.round(height * this.scale);
    for (const canvas of [this.image, this.overlay]) {
      canvas.style.width = `${cssWidth}px`;
      canvas.style.height = `${cssHeight}px`;
    }
    this.container.style.height = `${cssHeight}px`;
    this.container.style.width = `${cssWidth}px`;
    const ratio = window.devicePixelRatio || 1;
    this.overlay.width = Math.round(cssWidth * ratio);
    this.overlay.height = Math.round(cssHeight * ratio);
    this.image.getContext("2d").clearRect(0, 0, width, height);
    this.redraw();
  }

  /** Draw a PNG of `height` x `width` pixels (an older one arriving late is dropped). */
  async show(png, height, width) {
    const sequence = ++this.requested;
    if (height !== this.height || width !== this.width) this.setShape(height, width);
    const bitmap = await createImageBitmap(new Blob([png], { type: "image/png" }));
    if (sequence < this.shown) return;
    this.shown = sequence;
    const context = this.image.getContext("2d");
    context.imageSmoothingEnabled = false;
    context.drawImage(bitmap, 0, 0);
    bitmap.close();
  }

  /** The data coordinates (x = column, y = row, fractional) of a pointer event. */
  toData(event) {
    const rect = this.overlay.getBoundingClientRect();
    return { x: (event.clientX - rect.left) / this.scale, y: (event.clientY - rect.top) / this.scale };
  }

  /** The page (client) coordinates of data coordinates `x`, `y`. */
  toClient(x, y) {
    const rect = this.overlay.getBoundingClientRect();
    return { x: rect.left + x * this.scale, y: rect.top + y * this.scale };
  }

  /** Redraw the overlay with `this.drawOverlay(context, scale)` in CSS pixels. */
  redraw() {
    const context = this.overlay.getContext("2d");
    const ratio = this.overlay.width / Math.max(this.width * this.scale, 1);
    context.setTransform(ratio, 0, 0, ratio, 0, 0);
    context.clearRect(0, 0, this.overlay.width, this.overlay.height);
    this.drawOverlay(context, this.scale);
  }

  /** Pointer handlers: `down(point, event)`, `move(point, event)`, `up(point, event)`. */
  onPointer(handlers) {
    let dragging = false;
    this.overlay.addEventListener("pointerdown", (event) => {
      if (event.button !== 0) return;
      dragging = true;
      this.overlay.setPointerCapture(event.pointerId);
      handlers.down?.(this.toData(event), event);
    });
    this.overlay.addEventListener("pointermove", (event) => {
      const point = this.toData(event);
      if (dragging) handlers.move?.(point, event);
      handlers.hover?.(point, event);
    });
    const finish = (event) => {
      if (!dragging) return;
      dragging = false;
      handlers.up?.(this.toData(event), event);
    };
    this.overlay.addEventListener("pointerup", finish);
    this.overlay.addEventListener("pointercancel", finish);
  }
}

/** Stroke a path twice (dark, then light) so it shows on any colour. */
export function outline(context, path) {
  context.lineWidth = 3;
  context.strokeStyle = "rgba(0, 0, 0, 0.7)";
  path();
  context.stroke();
  context.lineWidth = 1.5;
  context.strokeStyle = "#ff4fd8";
  path();
  context.stroke();
}
