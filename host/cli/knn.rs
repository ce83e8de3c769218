//! `timewarp knn`: k-nearest-neighbour classification and its accuracy.

use super::plot::{self, HeatMap, PlotArgs, MAX_HEATMAP_SIDE};
use super::{
    counted, describe, matrix, options_for, print, three_significant_digits, ComputeArgs, Failure,
    Input, MetricArgs, Outputs, Target, VariantArg,
};
use ndarray::{Array2, ArrayView1};
use std::cmp::Reverse;
use std::path::PathBuf;
use std::time::Instant;
use timewarp::search::PruningStats;
use timewarp::{Backend, Float, Metric, Precision, Variant};

pub const EXAMPLES: &str = "\
Examples:
  # 1-NN with DTW on GunPoint: prints accuracy: 0.906667 and error: 0.093333
  timewarp knn --train tests/data/GunPoint_TRAIN.ts --test tests/data/GunPoint_TEST.ts --metric dtw

  # On every usable GPU (the default), the training set on each, the test set shared out
  timewarp knn --train train.ts --test test.ts --metric dtw --gpus all

  # TWED with aeon's defaults (nu 0.001, lambda 1, degree 2), 3 neighbours, on the CPU
  timewarp knn --train train.tsv --test test.tsv --metric twed -k 3 --device cpu

  # DTW with a band of 15 samples on the CPU: lower bounds skip most pairs (stderr says how many)
  timewarp knn --train train.ts --test test.ts --metric dtw --band 15 --device cpu

Ties: among equal distances the lower training index ranks first. With k > 1
the class with most votes among the k nearest wins; a tie between classes goes
to the class whose best-ranked member is nearest. Test series whose label the
training set lacks count as errors. Labels come from .ts or .tsv/.txt files.
With more than 500 classes the confusion matrix is not plotted (a warning says
so).";

#[derive(clap::Args)]
pub struct Args {
    /// The labelled training series (.ts, .tsv or .txt)
    #[arg(long, value_name = "FILE")]
    train: PathBuf,
    /// The labelled test series to classify (.ts, .tsv or .txt)
    #[arg(long, value_name = "FILE")]
    test: PathBuf,
    #[command(flatten)]
    metric: MetricArgs,
    #[command(flatten)]
    compute: ComputeArgs,
    #[command(flatten)]
    variant: VariantArg,
    /// Neighbours that vote, from 1 to the number of training series
    #[arg(short, default_value_t = 1)]
    k: usize,
    /// Compute every distance: no lower bounds for banded DTW on the CPU
    /// (the same results, slower; for benchmarks and checks)
    #[arg(long)]
    brute_force: bool,
    /// --plot: the confusion matrix (true classes in rows, predicted in columns)
    #[command(flatten)]
    plot: PlotArgs,
}

pub fn run(mut args: Args) -> Result<(), Failure> {
    let metric = args.metric.metric()?;
    let variant = args.variant.for_device(args.compute.device)?;
    if args.k == 0 {
        return Err(Failure::usage("-k 0: k must be at least 1"));
    }
    args.plot.check()?;
    let train = Input::load(&args.train)?;
    let test = Input::load(&args.test)?;
    let (train_labels, test_labels) = (train.labels()?, test.labels()?);
    train.check_same_dims(&test)?;
    let classes = classes(train_labels, test_labels);
    args.plot
        .leave_out_over("the data (classes)", classes.len(), MAX_HEATMAP_SIDE);
    if args.k > train.data.len() {
        return Err(Failure::usage(format!(
            "-k {}: more than the {} series of {}",
            args.k,
            train.data.len(),
            train.path.display()
        )));
    }
    let backend = args.compute.backend()?;
    // The training series kept resident while the test series stream
    // against them; only each test series' k nearest come back.
    let how = (variant, args.brute_force);
    let nearest = match args.compute.precision {
        Precision::F32 => {
            compute_resident_neighbours::<f32>(&test, &train, args.k, metric, backend, how)?
        }
        Precision::F64 => {
            compute_resident_neighbours::<f64>(&test, &train, args.k, metric, backend, how)?
        }
    };
    let predicted: Vec<&str> = nearest
        .outer_iter()
        .map(|ranked| vote(ranked, train_labels))
        .collect();
    let wrong = predicted
        .iter()
        .zip(test_labels)
        .filter(|(p, label)| **p != label.as_str())
        .count();
    let n = test_labels.len() as f64;
    let mut outputs = Outputs::default();
    args.plot.write_with(&mut outputs, || {
        let index = |label: &str| classes.iter().position(|c| c == label).unwrap_or(0);
        let mut counts = Array2::<f64>::zeros((classes.len(), classes.len()));
        for (truth, guess) in test_labels.iter().zip(&predicted) {
            counts[[index(truth), index(guess)]] += 1.0;
        }
        let one_each = classes.iter().map(|c| (c.clone(), 1)).collect::<Vec<_>>();
        HeatMap {
            values: counts,
            title: format!(
                "{}-NN confusion, accuracy {:.4}",
                args.k,
                (n - wrong as f64) / n
            ),
            x_label: "predicted class".into(),
            y_label: "true class".into(),
            row_groups: Some(one_each.clone()),
            column_groups: Some(one_each),
            annotate: true,
            path: Vec::new(),
        }
    })?;
    print(&format!(
        "accuracy: {:.6}\nerror: {:.6}\n",
        (n - wrong as f64) / n,
        wrong as f64 / n
    ))?;
    outputs.commit()
}

/// Every class of either set, in [`plot::class_order`]'s order.
fn classes(train: &[String], test: &[String]) -> Vec<String> {
    let mut all: Vec<String> = train.iter().chain(test).cloned().collect();
    all.sort();
    all.dedup();
    let (_, groups) = plot::class_order(&all);
    groups.into_iter().map(|(name, _)| name).collect()
}

/// The class of a test series from its nearest training series (indices,
/// nearest first, ties already ranked by index): the majority, a tie
/// between classes to the class whose best-ranked member is nearest.
fn vote<'a>(ranked: ArrayView1<usize>, labels: &'a [String]) -> &'a str {
    // Votes per class, classes in the order of their best-ranked member.
    let mut votes: Vec<(&str, usize)> = Vec::new();
    for &i in ranked.iter() {
        match votes.iter_mut().find(|(label, _)| *label == labels[i]) {
            Some((_, count)) => *count += 1,
            None => votes.push((&labels[i], 1)),
        }
    }
    // min_by_key keeps the first of equals: the nearest class wins a tie.
    votes
        .iter()
        .min_by_key(|&&(_, count)| Reverse(count))
        .map_or("", |&(label, _)| label)
}

/// The `k` nearest of `database`'s series to each of `queries`' (indices
/// in rows, nearest first), the database kept resident (uploaded once
/// where `backend` computes) while the queries stream against it, with
/// the lower bounds where they apply unless `brute_force`; its timing,
/// upload included, and what the bounds pruned, on stderr.
fn compute_resident_neighbours<T: Float>(
    queries: &Input,
    database: &Input,
    k: usize,
    metric: Metric,
    target: Target,
    (variant, brute_force): (Option<Variant>, bool),
) -> Result<Array2<usize>, Failure> {
    let queries = queries.series::<T>()?;
    let database = database.series::<T>()?;
    let start = Instant::now();
    let resident = timewarp::upload(&database, &options_for(target))?;
    let how = (variant, brute_force);
    let found = matrix::compute_neighbours(&queries, &resident, k, metric, target, how)?;
    let variant = match (target.backend, variant) {
        (Backend::Gpu(_), Some(name)) => format!(", {name}"),
        _ => String::new(),
    };
    eprintln!(
        "computed {} in {} ms on {} ({}{variant})",
        counted(queries.len() * database.len(), "distance", "distances"),
        three_significant_digits(start.elapsed().as_secs_f64() * 1e3),
        describe(target),
        T::NAME
    );
    if let Some(pruning) = found.pruning {
        eprintln!("{}", pruning_line(&pruning));
    }
    Ok(found.indices)
}

/// What the lower bounds of a k-NN pruned, in the words of `timewarp
/// search`'s report.
fn pruning_line(s: &PruningStats) -> String {
    let share = |count: u64| 100.0 * count as f64 / s.candidates.max(1) as f64;
    format!(
        "pruned by LB_Kim {:.2}%, LB_Keogh (query envelope) {:.2}%, LB_Keogh (data envelope) \
         {:.2}%; DTW computed {:.2}% (abandoned early {:.2}%) of {} pairs",
        share(s.kim),
        share(s.keogh_query),
        share(s.keogh_data),
        share(s.dtw),
        share(s.abandoned),
        s.candidates
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    fn labels(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn majority_vote_and_class_ties() {
        let train = labels(&["x", "y", "y", "x", "z"]);
        // The nearest alone decides for k = 1.
        assert_eq!(vote(array![2].view(), &train), "y");
        // Nearest three: x, y, y: y has the majority.
        assert_eq!(vote(array![0, 1, 2].view(), &train), "y");
        // Nearest four: x, y, y, x: a tie, and x's best member is nearest.
        assert_eq!(vote(array![0, 1, 2, 3].view(), &train), "x");
        // All five, y ranked first: x 2, y 2, z 1: y wins the tie.
        assert_eq!(vote(array![1, 4, 0, 3, 2].view(), &train), "y");
    }
}
