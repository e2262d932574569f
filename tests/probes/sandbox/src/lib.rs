//! Probe: tries every capability a hostile plugin might reach for through WASI — files,
//! environment, arguments, clocks, randomness, sockets, name lookup — and records what
//! it got. The host must give errors or nothing, never data. It also checks that relaxed
//! SIMD runs deterministically (a plugin's results must not depend on the host's CPU).
//!
//! Buffer `outcome` (single, uint8, one entry per check in `CHECKS` order):
//! 1 = denied / nothing obtained, 2 = got something (a sandbox leak).

use udf_sdk::prelude::*;
use wasi::sockets::network::{IpAddressFamily, IpSocketAddress, Ipv4SocketAddress};

/// The checks, in the order of the `outcome` buffer.
pub const CHECKS: [&str; 13] = [
    "read /etc/passwd",
    "list /",
    "list .",
    "write a file",
    "environment",
    "arguments",
    "wall clock",
    "monotonic clock",
    "random bytes",
    "tcp connect",
    "udp bind",
    "name lookup",
    "CPU-dependent relaxed SIMD",
];

struct Sandbox;

fn leak(got: bool) -> u8 {
    if got { 2 } else { 1 }
}

fn tcp_connect() -> bool {
    let network = wasi::sockets::instance_network::instance_network();
    let Ok(socket) = wasi::sockets::tcp_create_socket::create_tcp_socket(IpAddressFamily::Ipv4) else {
        return false;
    };
    let address = IpSocketAddress::Ipv4(Ipv4SocketAddress { port: 80, address: (127, 0, 0, 1) });
    if socket.start_connect(&network, address).is_err() {
        return false;
    }
    let pollable = socket.subscribe();
    pollable.block();
    socket.finish_connect().is_ok()
}

fn udp_bind() -> bool {
    let network = wasi::sockets::instance_network::instance_network();
    let Ok(socket) = wasi::sockets::udp_create_socket::create_udp_socket(IpAddressFamily::Ipv4) else {
        return false;
    };
    let address = IpSocketAddress::Ipv4(Ipv4SocketAddress { port: 0, address: (0, 0, 0, 0) });
    if socket.start_bind(&network, address).is_err() {
        return false;
    }
    socket.finish_bind().is_ok()
}

fn name_lookup() -> bool {
    let network = wasi::sockets::instance_network::instance_network();
    match wasi::sockets::ip_name_lookup::resolve_addresses(&network, "localhost") {
        Ok(stream) => {
            stream.subscribe().block();
            matches!(stream.resolve_next_address(), Ok(Some(_)))
        }
        Err(_) => false,
    }
}

/// Whether a relaxed-SIMD instruction shows the host CPU's own behaviour instead of the
/// deterministic one: `i32x4.relaxed_trunc_f32x4_s` of NaN is 0 in deterministic mode on
/// every CPU, but `i32::MIN` from x86's `cvttps2dq`.
#[target_feature(enable = "relaxed-simd")]
fn relaxed_simd_follows_the_cpu() -> bool {
    use core::arch::wasm32::*;
    let nan = std::hint::black_box(f32x4_splat(f32::NAN));
    i32x4_extract_lane::<0>(i32x4_relaxed_trunc_f32x4(nan)) != 0
}

fn run_checks() -> Vec<u8> {
    // std's HashMap keys come from WASI random too.
    let mut random = wasi::random::random::get_random_bytes(32);
    random.extend(wasi::random::insecure::get_insecure_random_bytes(32));
    let start = std::time::Instant::now();
    let mut spin = 0u64;
    for i in 0..1_000_000u64 {
        spin = std::hint::black_box(spin.wrapping_add(i));
    }
    vec![
        leak(std::fs::read("/etc/passwd").is_ok()),
        leak(std::fs::read_dir("/").is_ok()),
        leak(std::fs::read_dir(".").is_ok()),
        leak(std::fs::write("udf-probe-was-here.txt", b"x").is_ok()),
        leak(std::env::vars_os().next().is_some()),
        leak(std::env::args_os().next().is_some()),
        leak(std::time::SystemTime::now() != std::time::UNIX_EPOCH),
        leak(start.elapsed() != std::time::Duration::ZERO),
        leak(random.iter().any(|&b| b != 0)),
        leak(tcp_connect()),
        leak(udp_bind()),
        leak(name_lookup()),
        leak(relaxed_simd_follows_the_cpu()),
    ]
}

impl Udf for Sandbox {
    fn describe() -> Description {
        Description::new("sandbox", "0.1.0", "Tries to escape the sandbox").native_dtype().custom_merge()
    }

    fn result_buffers(_: &Params, _: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        Ok(vec![BufferDecl::single("outcome", DType::Uint8).extra_shape(&[CHECKS.len() as u64])])
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(Sandbox)
    }

    fn process_tile(&mut self, _: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        let found = run_checks();
        let mut outcome = results.view_mut::<u8>("outcome")?;
        for (o, f) in outcome.iter_mut().zip(found) {
            *o = (*o).max(f);
        }
        Ok(())
    }

    fn merge(_: &MergeContext, dest: &mut Buffers, src: &Buffers) -> Result<()> {
        let src = src.view::<u8>("outcome")?;
        Zip::from(&mut dest.view_mut::<u8>("outcome")?).and(&src).for_each(|d, &s| *d = (*d).max(s));
        Ok(())
    }
}

udf_sdk::export_udf!(Sandbox);
