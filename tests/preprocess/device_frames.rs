//! Frames whose planes are in CUDA device memory: the CUDA backend reads them in place (no copy)
//! and gives exactly what it gives for the same frames in host memory, which is what the CPU
//! backend gives; the CPU backend refuses them with a message naming the frame. The GPU tests put
//! the frames on the device themselves and skip, saying why, where there is no GPU.

use crate::common;

use std::sync::Arc;

use cudarc::driver::{CudaContext, DevicePtr};
use octopipe::batch::CropBatch;
use octopipe::frame::{BufferPool, DeviceBuffer, DeviceFrame, Frame, PixelFormat, PooledBuf};
use octopipe::preprocess::cpu::CpuBackend;
use octopipe::preprocess::cuda::{self, CudaBackend};
use octopipe::preprocess::{Backend, Interpolation, PreprocessConfig, PreprocessError};
use octopipe::Detection;

const FORMATS: [PixelFormat; 6] = [
    PixelFormat::I420,
    PixelFormat::Nv12,
    PixelFormat::Rgb,
    PixelFormat::Bgr,
    PixelFormat::Rgba,
    PixelFormat::Bgra,
];

/// A frame of pseudo-random bytes with padded strides ([`common::random_frame`]) and four boxes.
fn host_frame(format: PixelFormat, w: u32, h: u32, seed: u64) -> Frame {
    let mut f = common::random_frame(format, w, h, seed);
    for (i, b) in [
        [0, 0, 37, 53],
        [w - 61, h - 29, 61, 29],
        [w / 3, h / 4, 2, 2],
        [5, h / 2, w - 10, 9],
    ]
    .into_iter()
    .enumerate()
    {
        let mut d = Detection::new(b);
        d.track = Some(i as u32);
        f.detections.push(d);
    }
    f
}

/// The same frame with its planes copied into device memory that the test owns (the frame keeps
/// the allocation alive), written on a stream of the test's own.
fn on_device(f: &Frame, ctx: &Arc<CudaContext>) -> Frame {
    let stream = ctx.new_stream().unwrap();
    let slice = stream.clone_htod(f.data().unwrap()).unwrap();
    let ptr = {
        let (ptr, _sync) = slice.device_ptr(&stream);
        ptr
    };
    let planes = DeviceFrame::new(DeviceBuffer::new(
        ptr,
        f.layout.size(),
        0,
        stream.cu_stream() as u64,
        Box::new((slice, stream)),
    ));
    let mut d = Frame::on_device(f.stream, f.seq, &f.source, f.layout, f.colorimetry, planes);
    d.detections = f.detections.clone();
    d
}

fn batch_of(frames: Vec<Frame>) -> CropBatch {
    let mut batch = CropBatch::default();
    for f in frames {
        batch.push_frame(f, 64, 48, 3);
    }
    batch.build_blocks(256, 4);
    batch
}

#[test]
fn the_cpu_backend_refuses_device_frames_naming_them() {
    let f = host_frame(PixelFormat::Rgb, 160, 120, 7);
    // Never read: the CPU backend refuses the frame before touching its planes.
    let planes = DeviceFrame::new(DeviceBuffer::new(
        0x1000,
        f.layout.size(),
        0,
        0,
        Box::new(()),
    ));
    let mut d = Frame::on_device(3, 42, "cam", f.layout, f.colorimetry, planes);
    d.detections = f.detections.clone();
    let mut batch = batch_of(vec![d]);
    let mut cpu = CpuBackend::new(PreprocessConfig::default()).unwrap();
    let e = cpu.run(&mut batch).unwrap_err();
    assert!(matches!(
        e,
        PreprocessError::NotOnHost { stream: 3, seq: 42 }
    ));
    assert!(
        e.to_string()
            .contains("frame 42 of stream 3 is in CUDA device memory"),
        "{e}"
    );
    assert!(batch.tensor.as_f32().unwrap().iter().all(|v| *v == 0.0));
}

#[test]
fn device_frames_give_the_cpu_backends_values_bit_for_bit() {
    if !common::gpu("device_frames_give_the_cpu_backends_values_bit_for_bit") {
        return;
    }
    let ctx = CudaContext::new(0).unwrap();
    for interpolation in [Interpolation::Bilinear, Interpolation::Area] {
        for letterbox in [None, Some(114.0)] {
            let config = PreprocessConfig {
                interpolation,
                letterbox,
                ..PreprocessConfig::default()
            };
            for (k, format) in FORMATS.into_iter().enumerate() {
                let host: Vec<Frame> = (0..3)
                    .map(|i| {
                        host_frame(
                            format,
                            301 + 64 * i,
                            217 + 32 * i,
                            (k * 10) as u64 + i as u64,
                        )
                    })
                    .collect();
                // Reference: the CPU backend on host frames.
                let mut reference = batch_of(host.iter().map(on_host_copy).collect());
                CpuBackend::new(config.clone())
                    .unwrap()
                    .run(&mut reference)
                    .unwrap();
                // Every frame on the device, then host and device frames mixed in one batch.
                for mixed in [false, true] {
                    let frames = host
                        .iter()
                        .enumerate()
                        .map(|(i, f)| {
                            if mixed && i % 2 == 1 {
                                on_host_copy(f)
                            } else {
                                on_device(f, &ctx)
                            }
                        })
                        .collect();
                    let mut batch = batch_of(frames);
                    let mut gpu = CudaBackend::new(config.clone()).unwrap();
                    gpu.run(&mut batch).unwrap();
                    let (a, b) = (
                        batch.tensor.as_f32().unwrap(),
                        reference.tensor.as_f32().unwrap(),
                    );
                    assert_eq!(a.len(), b.len());
                    let differ = a.iter().zip(b).filter(|(x, y)| x != y).count();
                    eprintln!(
                        "{format} {interpolation:?} letterbox {letterbox:?} mixed {mixed}: {} values, {differ} differ",
                        a.len()
                    );
                    assert_eq!(
                        differ, 0,
                        "{format} {interpolation:?} {letterbox:?} mixed {mixed}"
                    );
                }
            }
        }
    }
}

/// A host copy of a (host) frame.
fn on_host_copy(f: &Frame) -> Frame {
    let mut c = Frame::new(
        f.stream,
        f.seq,
        &f.source,
        f.layout,
        f.colorimetry,
        PooledBuf::unpooled(f.data().unwrap().to_vec()),
    );
    c.detections = f.detections.clone();
    c
}

#[test]
fn device_output_needs_a_gpu_backend() {
    let config = PreprocessConfig {
        device_output: true,
        backend: octopipe::preprocess::BackendKind::Cpu,
        ..PreprocessConfig::default()
    };
    let e = octopipe::preprocess::create_backend(&config).err().unwrap();
    assert_eq!(
        e.to_string(),
        "preprocess: memory=device needs backend=cuda (or auto with a GPU)"
    );
    if cuda::available().is_err() {
        let auto = PreprocessConfig {
            device_output: true,
            ..PreprocessConfig::default()
        };
        let e = octopipe::preprocess::create_backend(&auto).err().unwrap();
        assert!(
            e.to_string()
                .starts_with("preprocess: memory=device needs a CUDA GPU: "),
            "{e}"
        );
    }
}

/// `memory=device`: the tensor stays on the device (no copy back) and holds exactly the values
/// the host output has.
#[test]
fn device_output_leaves_the_tensor_on_the_gpu() {
    use cudarc::driver::sys;
    if !common::gpu("device_output_leaves_the_tensor_on_the_gpu") {
        return;
    }
    let ctx = CudaContext::new(0).unwrap();
    for dtype in [octopipe::DType::F32, octopipe::DType::F16] {
        let host_config = PreprocessConfig {
            dtype,
            ..PreprocessConfig::default()
        };
        let frames = || {
            (0..2)
                .map(|i| host_frame(PixelFormat::I420, 640, 360, 90 + i))
                .collect::<Vec<_>>()
        };
        let mut reference = batch_of(frames());
        CudaBackend::new(host_config.clone())
            .unwrap()
            .run(&mut reference)
            .unwrap();
        let mut batch = batch_of(frames().iter().map(|f| on_device(f, &ctx)).collect());
        let mut gpu = CudaBackend::new(PreprocessConfig {
            device_output: true,
            ..host_config
        })
        .unwrap();
        gpu.run(&mut batch).unwrap();
        assert_eq!(batch.tensor.memory(), octopipe::Memory::Device(0));
        assert_eq!(batch.tensor.dtype, dtype);
        let d = batch.tensor.device().expect("device tensor");
        let bytes = d.len() * dtype.size();
        let mut back = vec![0u8; bytes];
        ctx.bind_to_thread().unwrap();
        // SAFETY: the tensor's buffer holds `len` elements; its stream is synchronized first.
        unsafe {
            sys::cuStreamSynchronize(d.stream() as sys::CUstream)
                .result()
                .unwrap();
            sys::cuMemcpyDtoH_v2(back.as_mut_ptr().cast(), d.ptr(), bytes)
                .result()
                .unwrap();
        }
        let expected: Vec<u8> = match dtype {
            octopipe::DType::F32 => reference
                .tensor
                .as_f32()
                .unwrap()
                .iter()
                .flat_map(|v| v.to_ne_bytes())
                .collect(),
            octopipe::DType::F16 => reference
                .tensor
                .as_f16()
                .unwrap()
                .iter()
                .flat_map(|v| v.to_ne_bytes())
                .collect(),
        };
        assert!(
            back == expected,
            "{dtype:?}: device tensor differs from the host output"
        );
        eprintln!(
            "{dtype:?}: {} values left on the device, equal to the host output",
            d.len()
        );
    }
}

/// A page-locked pool needs a GPU and says why not; on a GPU its buffers are page-locked (the
/// CUDA driver knows them), hold what was written, and come back to the pool for reuse.
#[test]
fn a_page_locked_pool_gives_page_locked_buffers_or_says_why() {
    let pool = match BufferPool::page_locked(0) {
        Ok(pool) => pool,
        Err(why) => {
            assert!(
                cuda::available().is_err(),
                "a GPU is here, yet no page-locked pool: {why}"
            );
            assert!(!why.to_string().is_empty());
            eprintln!("SKIPPED the GPU half: no page-locked pool ({why})");
            return;
        }
    };
    assert!(pool.is_page_locked());
    let len = 1920 * 1080 * 3 / 2;
    let mut a = pool.take(len);
    assert!(a.is_page_locked() && a.len() == len);
    a.iter_mut().enumerate().for_each(|(i, v)| *v = i as u8);
    assert!(a.iter().enumerate().all(|(i, v)| *v == i as u8));
    let ptr = a.as_ptr();
    let mut attr = cudarc::driver::sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_POINTER;
    let mut dev: cudarc::driver::sys::CUdeviceptr = 0;
    let mut out = [(&mut dev as *mut cudarc::driver::sys::CUdeviceptr).cast::<std::ffi::c_void>()];
    let ctx = CudaContext::new(0).unwrap();
    ctx.bind_to_thread().unwrap();
    // SAFETY: one attribute written to `dev`; the host address is only looked up.
    unsafe {
        cudarc::driver::sys::cuPointerGetAttributes(1, &mut attr, out.as_mut_ptr(), ptr as u64)
            .result()
            .unwrap();
    }
    assert_ne!(dev, 0, "the driver does not know the buffer as page-locked");
    drop(a);
    assert_eq!(pool.idle(), 1);
    // A frame of the same size or smaller reuses the buffer; a larger one gets a new one.
    let b = pool.take(len - 100);
    assert_eq!((b.as_ptr(), b.len(), pool.idle()), (ptr, len - 100, 0));
    drop(b);
    let c = pool.take(len + 1);
    assert!(c.is_page_locked() && c.len() == len + 1);
    let frame = Frame::new(
        0,
        0,
        "cam",
        octopipe::frame::FrameLayout::packed(PixelFormat::I420, 1920, 1080),
        octopipe::frame::Colorimetry::default(),
        c,
    );
    assert!(frame.is_page_locked());
    assert!(!host_frame(PixelFormat::I420, 64, 48, 1).is_page_locked());
}

/// `--cuda-wait block`'s call: every GPU's primary context then makes waiting threads sleep,
/// as the driver reports it; `auto` gives CUDA's own choice back.
#[test]
fn host_wait_is_set_on_every_gpu() {
    use octopipe::cuda::{host_wait, set_host_wait, HostWait};
    if !common::gpu("host_wait_is_set_on_every_gpu") {
        return;
    }
    let gpus = set_host_wait(HostWait::Block).unwrap();
    assert!(gpus >= 1);
    for device in 0..gpus {
        assert_eq!(host_wait(device).unwrap(), HostWait::Block, "cuda:{device}");
    }
    set_host_wait(HostWait::Auto).unwrap();
    assert_eq!(host_wait(0).unwrap(), HostWait::Auto);
}
