/* udf_nowasi.c: keep C plugins free of WASI imports.
 *
 * The SDK formats error messages with vsnprintf, which links wasi-libc's stdio, whose
 * exit path references fd_write, fd_seek and fd_close. A plugin never writes to a file
 * (udf-host grants no files, and the C SDK logs through the host's `log`), so these
 * definitions take the place of the WASI imports and fail with EBADF. The component then
 * imports only `udf:plugin/host`: no WASI adapter is needed. A plugin that calls libc
 * functions needing other WASI calls (clocks, random, files) fails at
 * `wasm-tools component new` with "module requires an import interface named
 * wasi_snapshot_preview1"; build such a plugin with the WASI preview1 adapter instead. */

#include <stdint.h>

#define WASI_EBADF 8

int32_t __imported_wasi_snapshot_preview1_fd_write(int32_t fd, int32_t iovs, int32_t iovs_len, int32_t nwritten) {
    (void)fd, (void)iovs, (void)iovs_len, (void)nwritten;
    return WASI_EBADF;
}

int32_t __imported_wasi_snapshot_preview1_fd_seek(int32_t fd, int64_t offset, int32_t whence, int32_t newoffset) {
    (void)fd, (void)offset, (void)whence, (void)newoffset;
    return WASI_EBADF;
}

int32_t __imported_wasi_snapshot_preview1_fd_close(int32_t fd) {
    (void)fd;
    return WASI_EBADF;
}
