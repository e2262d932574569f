//! Guest side of the tile-passing measurement (see docs/tile-passing.md).

wit_bindgen::generate!({ path: "wit", world: "tiles" });

struct Probe;

fn sum(values: &[f32]) -> f32 {
    // Eight lanes so the compiler vectorises with simd128, as a real reduction would.
    let mut acc = [0f32; 8];
    let chunks = values.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        for (a, v) in acc.iter_mut().zip(c) {
            *a += v;
        }
    }
    acc.iter().sum::<f32>() + rest.iter().sum::<f32>()
}

impl Guest for Probe {
    fn take_f32(data: Vec<f32>) -> (f32, u32) {
        (sum(&data), (data.as_ptr() as usize % 16) as u32)
    }

    fn take_bytes(data: Vec<u8>) -> (f32, u32) {
        let misalignment = (data.as_ptr() as usize % 16) as u32;
        let total = match bytemuck::try_cast_slice::<u8, f32>(&data) {
            Ok(values) => sum(values),
            // Unaligned: a copy would be needed.
            Err(_) => sum(&data.chunks_exact(4).map(bytemuck::pod_read_unaligned).collect::<Vec<f32>>()),
        };
        (total, misalignment)
    }

    fn touch_f32(data: Vec<f32>) -> u32 {
        data.len() as u32
    }

    fn touch_bytes(data: Vec<u8>) -> u32 {
        data.len() as u32
    }
}

export!(Probe);
