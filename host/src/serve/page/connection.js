// The WebSocket to the server: requests out as JSON, results in as binary messages
// (a JSON header, then raw arrays and PNG images; host/src/serve/wire.rs).

const TYPED = {
  bool: Uint8Array, uint8: Uint8Array, int8: Int8Array, uint16: Uint16Array, int16: Int16Array,
  uint32: Uint32Array, int32: Int32Array, float32: Float32Array, float64: Float64Array,
  // 64-bit integers arrive exactly; their elements are BigInts (Number() them to plot).
  int64: BigInt64Array, uint64: BigUint64Array,
};

/** Split a binary message into its header and a function that returns a part's bytes. */
export function decode(buffer) {
  const length = new DataView(buffer).getUint32(0, true);
  const header = JSON.parse(new TextDecoder().decode(new Uint8Array(buffer, 4, length)));
  const base = 4 + length;
  const part = ([offset, size]) => new Uint8Array(buffer, base + offset, size);
  const typed = (dtype, [offset, size]) => {
    const Type = TYPED[dtype];
    if (!Type) throw new Error(`the page cannot hold ${dtype} data`);
    return new Type(buffer, base + offset, size / Type.BYTES_PER_ELEMENT);
  };
  return { header, part, typed };
}

/** A connection: `send(object)`; `on(type, handler)` for "result", "export", "error", "status". */
export class Connection {
  constructor(url) {
    this.url = url;
    this.handlers = {};
    this.queue = [];
    this.open();
  }

  on(type, handler) {
    (this.handlers[type] ||= []).push(handler);
  }

  emit(type, value) {
    for (const handler of this.handlers[type] || []) handler(value);
  }

  open() {
    this.socket = new WebSocket(this.url);
    this.socket.binaryType = "arraybuffer";
    this.socket.onopen = () => {
      this.emit("status", "connected");
      for (const message of this.queue.splice(0)) this.socket.send(message);
    };
    this.socket.onclose = () => this.emit("status", "disconnected: is udf-host serve still running? reload the page");
    this.socket.onmessage = (event) => {
      if (typeof event.data === "string") {
        const message = JSON.parse(event.data);
        this.emit(message.type, message);
        return;
      }
      const message = decode(event.data);
      this.emit(message.header.type, message);
    };
  }

  send(object) {
    const text = JSON.stringify(object);
    if (this.socket.readyState === WebSocket.OPEN) this.socket.send(text);
    else this.queue.push(text);
  }
}
