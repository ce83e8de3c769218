//! Soft-DTW barycenter (Cuturi & Blondel 2017, section 4) of a few GunPoint
//! series by gradient descent on the GPU (on the CPU, with a message, if
//! there is no usable GPU):
//!
//!     cargo run --release --example barycenter
//!
//! The barycenter `z` minimises `L(z) = 1/K sum_k sdtw(z, y_k)`; each step
//! computes all `K` losses and their gradients with respect to `z` as one
//! paired batch (`z` against each `y_k`) and moves `z` down the mean
//! gradient, halving the step when the loss would rise.

use ndarray::{Array2, Axis};
use std::path::Path;
use timewarp::{gpu::Gpu, soft_dtw_pairs_gradient, ComputeOptions, Device, SeriesSet, SoftDtw};

const SERIES: usize = 8;
const GAMMA: f64 = 1.0;
const STEPS: usize = 60;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/GunPoint_TRAIN.ts");
    let data = timewarp::formats::read_dataset(&path)?;
    let labels = data.labels.clone().unwrap_or_default();
    // The first few series of the first class.
    let class = labels.first().cloned().unwrap_or_default();
    let chosen: Vec<Array2<f32>> = data
        .series
        .iter()
        .zip(labels.iter().map(Some).chain(std::iter::repeat(None)))
        .filter(|(_, label)| label.is_none_or(|l| *l == class))
        .take(SERIES)
        .map(|(s, _)| s.mapv(|v| v as f32))
        .collect();
    let y = SeriesSet::from_series(chosen.iter().map(|s| s.view()))?;

    let device = match Gpu::get() {
        Ok(gpu) => {
            println!("computing on the GPU: {}", gpu.info().name);
            Device::Gpu
        }
        Err(reason) => {
            println!("{reason}; computing on the CPU instead");
            Device::Cpu
        }
    };
    let options = ComputeOptions::on(device);
    let metric = SoftDtw::new(GAMMA)?;
    println!(
        "soft-DTW barycenter of {} GunPoint series of class {class:?} (length {}), gamma {GAMMA}",
        y.len(),
        y.max_len()
    );

    // Start from the sample-wise mean of the series.
    let views: Vec<_> = chosen.iter().map(|s| s.view()).collect();
    let mut z = ndarray::stack(Axis(0), &views)?
        .mean_axis(Axis(0))
        .expect("at least one series");
    let loss_and_gradient = |z: &Array2<f32>| -> Result<(f32, Array2<f32>), timewarp::Error> {
        let copies = SeriesSet::from_series(std::iter::repeat_n(z.view(), y.len()))?;
        let result = soft_dtw_pairs_gradient(&copies, &y, metric, &options, false)?;
        let k = y.len() as f32;
        let mut gradient = Array2::zeros(z.raw_dim());
        for g in &result.grad_x {
            gradient += &g;
        }
        Ok((result.values.sum() / k, gradient / k))
    };

    let (mut loss, mut gradient) = loss_and_gradient(&z)?;
    println!("step    0: loss {loss:.4}");
    let mut step = 0.1f32;
    for iteration in 1..=STEPS {
        // Backtracking: a step that raises the loss is halved.
        loop {
            let candidate = &z - &(&gradient * step);
            let (new_loss, new_gradient) = loss_and_gradient(&candidate)?;
            if new_loss <= loss || step < 1e-8 {
                (z, loss, gradient) = (candidate, new_loss, new_gradient);
                step *= 1.2;
                break;
            }
            step /= 2.0;
        }
        if iteration % 5 == 0 {
            println!("step {iteration:4}: loss {loss:.4}");
        }
    }
    let first: Vec<String> = z.iter().take(8).map(|v| format!("{v:.3}")).collect();
    println!("barycenter, first samples: [{}, ...]", first.join(", "));
    Ok(())
}
