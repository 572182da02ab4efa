//! `octopipe bench infer` (feature `bench`): a model alone in ONNX Runtime, one row per batch
//! size and a row of changing sizes; on a machine without CUDA's execution provider `ep=cuda` is
//! an error naming the model. Real ONNX Runtime, the shared classifier.
#![cfg(feature = "bench")]

use crate::common;

use octopipe::onnx::Ep;
use octopipe_tools::bench::{infer, InferOptions};

#[test]
fn a_row_per_batch_size_and_one_of_changing_sizes() {
    if !common::ort_ready() {
        return;
    }
    let Some(data) = common::shared_data() else {
        return;
    };
    let opts = InferOptions {
        model: data.join("models/visdrone-crops-64.onnx"),
        eps: vec![Ep::Cpu],
        batches: vec![1, 4],
        runs: 3,
        threads: 1,
        tunings: Vec::new(),
        fixed_only: false,
        concurrent: 1,
        ort: true,
        octopipe: false,
    };
    let table = infer(&opts).unwrap();
    eprintln!("{table}");
    let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("| cpu")).collect();
    assert_eq!(rows.len(), 3, "{table}");
    assert!(rows[0].starts_with("| cpu | - | host | 1 | 3 |"), "{table}");
    assert!(rows[1].starts_with("| cpu | - | host | 4 | 3 |"), "{table}");
    assert!(
        rows[2].starts_with("| cpu | - | host | 1-4 changing | 3 |"),
        "{table}"
    );
    // Items per second: a positive number in every row.
    for row in rows {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let per_second: f64 = cells[8].parse().unwrap();
        assert!(per_second > 0.0, "{row}");
    }
}

#[test]
fn cuda_without_its_execution_provider_is_an_error_naming_the_model() {
    if !common::ort_ready() {
        return;
    }
    let Some(data) = common::shared_data() else {
        return;
    };
    let model = data.join("models/visdrone-crops-64.onnx");
    let opts = InferOptions {
        model: model.clone(),
        eps: vec![Ep::Cuda(0)],
        batches: vec![1],
        runs: 1,
        threads: 1,
        tunings: vec![octopipe_tools::bench::Tuning::parse("plain").unwrap()],
        fixed_only: false,
        concurrent: 1,
        ort: true,
        octopipe: false,
    };
    match infer(&opts) {
        // A GPU and ONNX Runtime's CUDA build (the device machine): it runs.
        Ok(table) => assert!(table.contains("| cuda | plain | device | 1 |"), "{table}"),
        Err(e) => assert!(e.to_string().contains(&model.display().to_string()), "{e}"),
    }
}
