# LiberTEM's documentation, docs/source/udf/advanced.rst ("Tiled processing", "Post-processing", "Task data"), as of LiberTEM commit 83313ca
# (https://github.com/LiberTEM/LiberTEM; MIT License, Copyright (c) 2024 LiberTEM creators).
# The original that plugins/examples/sparse_correlation/src/lib.rs ports; scripts/gallery-lines.py
# counts its non-blank, non-comment, non-docstring lines.

def process_tile(self, tile):
    tile_slice = self.meta.slice
    c = self.task_data.mask_container
    tile_t = np.zeros(
        (np.prod(tile.shape[1:]), tile.shape[0]),
        dtype=tile.dtype
    )
    log_scale(tile.reshape((tile.shape[0], -1)).T, out=tile_t)

    sl = c.get(key=tile_slice, transpose=False)
    self.results.corr[:] += sl.dot(tile_t).T

def postprocess(self):
    steps = 2 * self.params.steps + 1
    corrmaps = self.results.corr.reshape((
        -1,  # frames
        len(self.params.peaks),  # peaks
        steps,  # Y steps
        steps,  # X steps
    ))
    peaks = self.params.peaks
    (centers, refineds, peak_values, peak_elevations) = self.output_buffers()
    for f in range(corrmaps.shape[0]):
        evaluate_correlations(
            corrs=corrmaps[f], peaks=peaks, crop_size=self.params.steps,
            out_centers=centers[f], out_refineds=refineds[f],
            out_heights=peak_values[f], out_elevations=peak_elevations[f]
        )

def get_task_data(self):
    match_pattern = self.params.match_pattern
    crop_size = match_pattern.get_crop_size()
    size = (2 * crop_size + 1, 2 * crop_size + 1)
    template = match_pattern.get_mask(sig_shape=size)
    steps = self.params.steps
    peak_offsetY, peak_offsetX = np.mgrid[-steps:steps + 1, -steps:steps + 1]

    offsetY = self.params.peaks[:, 0, np.newaxis, np.newaxis] + peak_offsetY - crop_size
    offsetX = self.params.peaks[:, 1, np.newaxis, np.newaxis] + peak_offsetX - crop_size

    offsetY = offsetY.flatten()
    offsetX = offsetX.flatten()

    stack = functools.partial(
        masks.sparse_template_multi_stack,
        mask_index=range(len(offsetY)),
        offsetX=offsetX,
        offsetY=offsetY,
        template=template,
        imageSizeX=self.meta.dataset_shape.sig[1],
        imageSizeY=self.meta.dataset_shape.sig[0]
    )
    # CSC matrices in combination with transposed data are fastest
    container = MaskContainer(mask_factories=stack, dtype=np.float32,
        use_sparse='scipy.sparse.csc')

    kwargs = {
        'mask_container': container,
        'crop_size': crop_size,
    }
    return kwargs
