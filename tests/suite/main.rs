//! The test suite: one binary, modules by topic. GPU tests skip (saying
//! why, once) without a usable GPU, and fail instead under `REQUIRE_GPU=1`.
//!
//! | module | checks |
//! |---|---|
//! | `oracle` | the oracle against hand-worked cases, finite differences, aeon and tslearn |
//! | `drivers` | the kernels' drivers on emulated warps, blocks and grids (CPU) against the oracle |
//! | `lockstep` | the CPU backend's lockstep lanes and batches |
//! | `matrix` | distance matrices: measure x variant x precision x shape against the oracle |
//! | `long_pairs` | pairs of 65,536 to 100,003 samples against the CPU backend |
//! | `resident` | resident sets and the streamed pipeline, every budget |
//! | `page_locked` | batches in page-locked memory: the same bits as ordinary ones |
//! | `paths` | alignments: DTW and TWED paths, Soft-DTW's expected alignment, Hirschberg, `align` and plots |
//! | `paired` | Soft-DTW of paired batches: values, gradients, divergence |
//! | `multi_gpu` | every GPU of the host against GPU 0 alone, bit for bit; the fault hook |
//! | `knn` | k-NN with lower bounds (banded DTW, CPU) against the brute force, bit for bit; the bounds on whole series |
//! | `search` | subsequence search against a brute force; its bounds against the oracle's DTW; its errors |
//! | `search_cli` | `timewarp search` end to end: matches, statistics, outputs, usage errors |
//! | `search_files` | series searched in files read unit by unit (`.npy`, raw), text series |
//! | `subsequence` | open-ended subsequence alignment against the brute force of its definition and tslearn's algorithm; its errors |
//! | `subsequence_gpu` | open-ended subsequence alignment on the GPU against the CPU, bit for bit: query lengths, chunks and segments, files, ties, extremes, the CLI |
//! | `errors` | bad parameters and input: typed errors, never panics |
//! | `catalogue` | the kernel catalogue against the PTX, both ways |
//! | `every_kernel` | every kernel of the catalogue launched once against the oracle (the sanitizer runs' set) |
//! | `architecture` | no import cycles, no file over 600 lines |
//! | `cli` | the `timewarp` binary end to end |

mod architecture;
mod catalogue;
mod cli;
mod common;
mod drivers;
mod errors;
mod every_kernel;
mod knn;
mod knn_gpu;
mod lockstep;
mod long_pairs;
mod matrix;
mod multi_gpu;
mod oracle;
mod page_locked;
mod paired;
mod paths;
mod resident;
mod search;
mod search_cli;
mod search_files;
mod search_gpu;
mod subsequence;
mod subsequence_gpu;
