//! The layout the design keeps (docs/design.md), checked on the sources:
//! no module of the host crate or of the kernels crate depends on one that
//! depends back on it (no import cycles, however long), the folders of the
//! GPU runtime (`host/gpu/`) depend on each other only as [`GPU_FOLDERS`]
//! allows, and no source file (of the host crate, the kernels crate or the
//! Python extension) is over 600 lines but the kernel entry table.
//!
//! A module's dependencies are the modules its code names through
//! `crate::` and `super::` paths (in `use` statements and in the code),
//! resolved through the re-exports of `lib.rs` and `mod.rs` files to the
//! module that defines the item. Re-exports and `mod` declarations are not
//! dependencies, and unit-test modules (`#[cfg(test)] mod tests`) are left
//! out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Lines a source file may have.
const MAX_LINES: usize = 600;

type Module = Vec<String>;

/// The folders of `host/gpu/`, each with the folders it may depend on:
/// policy without CUDA at the bottom, then the GPU itself, then the data
/// moved to and from it, then the launches the operations share, then the
/// operations, none of which depends on another. A module of a folder may
/// depend on any other module of its own folder (the cycle check still
/// applies). `host/gpu/mod.rs` itself only declares and re-exports.
const GPU_FOLDERS: &[(&str, &[&str])] = &[
    ("plan", &[]),
    ("runtime", &["plan"]),
    ("transfer", &["runtime", "plan"]),
    ("launch", &["transfer", "runtime", "plan"]),
    ("matrix", &["launch", "transfer", "runtime", "plan"]),
    ("paired", &["launch", "transfer", "runtime", "plan"]),
    ("paths", &["launch", "transfer", "runtime", "plan"]),
    ("search", &["launch", "transfer", "runtime", "plan"]),
    ("neighbours", &["launch", "transfer", "runtime", "plan"]),
];

/// The modules outside `host/gpu/` that the GPU runtime may depend on: the
/// leaf types, below every backend and entry point.
const GPU_LEAVES: &[&str] = &[
    "error",
    "finite",
    "float",
    "interrupt",
    "metric",
    "options",
    "results",
    "series",
    "storage",
];

/// One crate's sources: module path -> code (comments and unit tests removed).
struct Crate {
    modules: BTreeMap<Module, String>,
    /// Names re-exported by a module (`pub use`), to the path they stand for.
    exports: BTreeMap<(Module, String), Vec<String>>,
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file without comments and its unit-test module.
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The module path of `file` in the crate rooted at `root` (`root_file`
/// being its `lib.rs` or `main.rs`).
fn module_of(root: &Path, file: &Path) -> Module {
    let relative = file.strip_prefix(root).unwrap().with_extension("");
    let mut parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// Expands `use` trees (`a::{b, c::{d, e}}`) into paths.
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap().trim();
        return vec![path.to_string()];
    };
    let prefix = tree[..open].trim_end_matches("::").trim();
    let inner = &tree[open + 1..tree.rfind('}').unwrap()];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (k, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(expand)
        .map(|p| match p.as_str() {
            "self" => prefix.to_string(),
            _ => format!("{prefix}::{p}"),
        })
        .collect()
}

/// The `use` statements of some code: (public re-export?, paths).
fn uses(code: &str) -> Vec<(bool, Vec<String>)> {
    let mut result = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("use ") {
        let before = &rest[..at];
        let line_start = before.rfind('\n').map_or(0, |k| k + 1);
        // What precedes `use` in its statement: nothing, or `pub(...)`.
        let head = before[line_start..]
            .rsplit([';', '{', '}'])
            .next()
            .unwrap_or("")
            .trim();
        let is_statement = head.is_empty() || head.starts_with("pub");
        let end = rest[at..].find(';').map_or(rest.len(), |k| at + k);
        let tree = &rest[at + 4..end];
        // A `use` tree holds paths and braces only (not the word in a string).
        let is_tree = tree
            .chars()
            .all(|c| c.is_alphanumeric() || "_:{},* \n".contains(c));
        let word_start = at == 0 || !rest.as_bytes()[at - 1].is_ascii_alphanumeric();
        if is_statement && is_tree && word_start {
            result.push((head.starts_with("pub"), expand(tree)));
        }
        rest = &rest[end.min(rest.len() - 1) + 1..];
    }
    result
}

impl Crate {
    fn load(root: &Path, files: &[PathBuf]) -> Crate {
        let mut modules = BTreeMap::new();
        for file in files {
            let text = std::fs::read_to_string(file).unwrap();
            modules.insert(module_of(root, file), code(&text));
        }
        let exports = Self::load_exports(&modules);
        Crate { modules, exports }
    }

    /// `path` as named from `module`, from the crate root (`None` for
    /// paths into other crates).
    fn absolute(module: &Module, path: &str) -> Vec<String> {
        let mut parts: Vec<String> = path.split("::").map(|s| s.trim().to_string()).collect();
        let mut base = module.clone();
        match parts[0].as_str() {
            "crate" => {
                parts.remove(0);
                base.clear();
            }
            "super" => {
                while parts.first().map(String::as_str) == Some("super") {
                    parts.remove(0);
                    base.pop();
                }
            }
            "self" => {
                parts.remove(0);
            }
            // A child module declared here, or another crate.
            _ => {}
        }
        base.extend(parts);
        base
    }

    /// The module that defines what `path` (absolute) names.
    fn resolve(&self, path: &[String], depth: usize) -> Option<Module> {
        let mut longest = Vec::new();
        for k in (0..=path.len()).rev() {
            if self.modules.contains_key(&path[..k]) {
                longest = path[..k].to_vec();
                break;
            }
        }
        match path.get(longest.len()) {
            Some(name) if depth < 8 => match self.exports.get(&(longest.clone(), name.clone())) {
                Some(target) if target.as_slice() != path => {
                    let mut target = target.clone();
                    target.extend(path[longest.len() + 1..].iter().cloned());
                    self.resolve(&target, depth + 1).or(Some(longest))
                }
                _ => Some(longest),
            },
            _ => Some(longest),
        }
    }

    /// Module -> the modules its code depends on.
    fn dependencies(&self) -> BTreeMap<Module, BTreeSet<Module>> {
        let mut graph = BTreeMap::new();
        for (module, code) in &self.modules {
            let mut paths: Vec<String> = uses(code)
                .into_iter()
                .filter(|(public, _)| !public)
                .flat_map(|(_, paths)| paths)
                .filter(|p| p.starts_with("crate::") || p.starts_with("super::"))
                .collect();
            // Paths in the code itself (re-exports are not dependencies).
            let code = without_re_exports(code);
            for start in ["crate::", "super::"] {
                let mut rest = code.as_str();
                while let Some(at) = rest.find(start) {
                    let tail = &rest[at..];
                    let end = tail
                        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                        .unwrap_or(tail.len());
                    let prefixed = at == 0 || !rest.as_bytes()[at - 1].is_ascii_alphanumeric();
                    if prefixed {
                        paths.push(tail[..end].trim_end_matches(':').to_string());
                    }
                    rest = &tail[end.max(1)..];
                }
            }
            let targets: BTreeSet<Module> = paths
                .iter()
                .filter_map(|p| self.resolve(&Self::absolute(module, p), 0))
                .filter(|target| target != module)
                .collect();
            graph.insert(module.clone(), targets);
        }
        graph
    }
}

/// `code` without its re-exports (`pub use` and `pub(...) use`
/// statements), so that the paths they name do not count as dependencies.
fn without_re_exports(code: &str) -> String {
    let mut result = String::new();
    let (mut from, mut search) = (0, 0);
    while let Some(found) = code[search..].find("pub") {
        let at = search + found;
        search = at + 3;
        let line_start = code[..at].rfind('\n').map_or(0, |k| k + 1);
        let after = &code[at..];
        let head = match after.starts_with("pub(") {
            true => after.find(')').map(|k| k + 1),
            false => Some(3),
        };
        let is_use = head.is_some_and(|k| after[k..].trim_start().starts_with("use "));
        if code[line_start..at].trim().is_empty() && is_use {
            let end = after.find(';').map_or(code.len(), |k| at + k + 1);
            result.push_str(&code[from..at]);
            (from, search) = (end, end);
        }
    }
    result.push_str(&code[from..]);
    result
}

/// A cycle of the graph, if it has one.
fn find_cycle(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Option<Vec<Module>> {
    fn visit(
        node: &Module,
        graph: &BTreeMap<Module, BTreeSet<Module>>,
        state: &mut BTreeMap<Module, u8>,
        stack: &mut Vec<Module>,
    ) -> Option<Vec<Module>> {
        state.insert(node.clone(), 1);
        stack.push(node.clone());
        for next in graph.get(node).into_iter().flatten() {
            match state.get(next).copied().unwrap_or(0) {
                1 => {
                    let from = stack.iter().position(|m| m == next).unwrap();
                    let mut cycle = stack[from..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(cycle) = visit(next, graph, state, stack) {
                        return Some(cycle);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(node.clone(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for node in graph.keys() {
        if state.get(node).copied().unwrap_or(0) == 0 {
            if let Some(cycle) = visit(node, graph, &mut state, &mut Vec::new()) {
                return Some(cycle);
            }
        }
    }
    None
}

fn show(cycle: &[Module]) -> String {
    cycle
        .iter()
        .map(|m| {
            if m.is_empty() {
                "crate".to_string()
            } else {
                m.join("::")
            }
        })
        .collect::<Vec<_>>()
        .join(" -> ")
}

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The host library, the command line and the kernels crate, each its own
/// crate.
fn crates() -> Vec<(&'static str, Crate)> {
    let root = repository();
    let mut host = Vec::new();
    rust_files(&root.join("host"), &mut host);
    let (cli, library): (Vec<PathBuf>, Vec<PathBuf>) = host
        .into_iter()
        .partition(|f| f.ends_with("main.rs") || f.starts_with(root.join("host/cli")));
    let mut kernels = Vec::new();
    rust_files(&root.join("kernels-gpu/src"), &mut kernels);
    vec![
        ("host library", Crate::load(&root.join("host"), &library)),
        ("command line", Crate::load(&root.join("host"), &cli)),
        (
            "kernels",
            Crate::load(&root.join("kernels-gpu/src"), &kernels),
        ),
    ]
}

#[test]
fn no_module_depends_on_itself_through_others() {
    for (name, krate) in crates() {
        let graph = krate.dependencies();
        assert!(
            graph.len() > 3,
            "{name}: found only {} modules",
            graph.len()
        );
        if let Some(cycle) = find_cycle(&graph) {
            panic!("{name}: import cycle {}", show(&cycle));
        }
    }
}

/// Every dependency of a module of `host/gpu/` that [`GPU_FOLDERS`] and
/// [`GPU_LEAVES`] do not allow, and every module of `host/gpu/` in no
/// folder of the table, each as a line.
fn gpu_folder_violations(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<String> {
    let name = |m: &Module| show(std::slice::from_ref(m));
    let mut violations = Vec::new();
    for (module, targets) in graph {
        if module.first().map(String::as_str) != Some("gpu") {
            continue;
        }
        let Some(folder) = module.get(1) else {
            // `gpu` itself: re-exports only.
            for target in targets {
                violations.push(format!("gpu depends on {}", name(target)));
            }
            continue;
        };
        let Some((_, allowed)) = GPU_FOLDERS.iter().find(|(f, _)| *f == folder.as_str()) else {
            violations.push(format!("{} is in no folder of GPU_FOLDERS", name(module)));
            continue;
        };
        for target in targets {
            let fine = match target.first().map(String::as_str) {
                Some("gpu") => target
                    .get(1)
                    .is_some_and(|f| f == folder || allowed.contains(&f.as_str())),
                Some(outside) => GPU_LEAVES.contains(&outside),
                // The crate root: only declarations and re-exports.
                None => true,
            };
            if !fine {
                violations.push(format!("{} depends on {}", name(module), name(target)));
            }
        }
    }
    violations
}

#[test]
fn gpu_folders_depend_only_as_the_table_allows() {
    let (_, host) = crates().swap_remove(0);
    let graph = host.dependencies();
    for (folder, _) in GPU_FOLDERS {
        assert!(
            graph
                .keys()
                .any(|m| m.len() > 2 && m[0] == "gpu" && m[1] == *folder),
            "no module in host/gpu/{folder}/"
        );
    }
    let violations = gpu_folder_violations(&graph);
    assert!(
        violations.is_empty(),
        "dependencies against GPU_FOLDERS:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_folder_check_finds_dependencies_against_the_table() {
    let module = |path: &str| -> Module { path.split("::").map(String::from).collect() };
    let graph: BTreeMap<Module, BTreeSet<Module>> = [
        ("gpu::plan::select", vec!["error", "gpu::plan::layout"]),
        ("gpu::runtime::context", vec!["gpu::plan::spread"]),
        // Upwards, sideways between operations, and out to an entry point.
        ("gpu::runtime::pinned", vec!["gpu::transfer::uploads"]),
        ("gpu::paired::values", vec!["gpu::matrix::workers"]),
        ("gpu::paths::last_columns", vec!["api::paths"]),
        ("gpu::elsewhere", vec![]),
    ]
    .into_iter()
    .map(|(m, targets)| (module(m), targets.into_iter().map(module).collect()))
    .collect();
    assert_eq!(
        gpu_folder_violations(&graph),
        [
            "gpu::elsewhere is in no folder of GPU_FOLDERS",
            "gpu::paired::values depends on gpu::matrix::workers",
            "gpu::paths::last_columns depends on api::paths",
            "gpu::runtime::pinned depends on gpu::transfer::uploads",
        ]
    );
}

#[test]
fn the_checker_finds_cycles_and_resolves_re_exports() {
    let files = [
        (vec![], "mod a; mod b; pub use a::Thing;"),
        (
            vec!["a".to_string()],
            "use crate::b::{other, Other};\npub struct Thing;",
        ),
        (
            vec!["b".to_string()],
            "use crate::Thing; // through the re-export\npub struct Other;",
        ),
    ];
    let modules: BTreeMap<Module, String> =
        files.iter().map(|(m, c)| (m.clone(), code(c))).collect();
    let exports = Crate::load_exports(&modules);
    let krate = Crate { modules, exports };
    let cycle = find_cycle(&krate.dependencies()).expect("a -> b -> a");
    assert_eq!(show(&cycle), "a -> b -> a");
    assert_eq!(
        without_re_exports(
            "pub use crate::a::X;\n    pub(crate) use crate::b::{Y, Z};\nuse crate::c;"
        ),
        "\n    \nuse crate::c;"
    );
    assert_eq!(
        expand("x::{y, z::{self, w as v}}"),
        ["x::y", "x::z", "x::z::w"]
    );
}

impl Crate {
    fn load_exports(modules: &BTreeMap<Module, String>) -> BTreeMap<(Module, String), Vec<String>> {
        let mut exports = BTreeMap::new();
        for (module, code) in modules {
            for (public, paths) in uses(code) {
                for path in paths.into_iter().filter(|_| public) {
                    let absolute = Self::absolute(module, &path);
                    if let Some(name) = absolute.last() {
                        exports.insert((module.clone(), name.clone()), absolute);
                    }
                }
            }
        }
        exports
    }
}

#[test]
fn no_source_file_is_over_600_lines_but_the_entry_table() {
    let root = repository();
    let mut files = Vec::new();
    rust_files(&root.join("host"), &mut files);
    rust_files(&root.join("kernels-gpu/src"), &mut files);
    let host_and_kernels = files.len();
    rust_files(&root.join("python/src"), &mut files);
    assert!(files.len() > host_and_kernels, "no sources in python/src");
    let long: Vec<String> = files
        .iter()
        .filter(|f| !f.ends_with("kernels-gpu/src/entries.rs"))
        .filter_map(|f| {
            let lines = std::fs::read_to_string(f).unwrap().lines().count();
            (lines > MAX_LINES)
                .then(|| format!("{} ({lines})", f.strip_prefix(&root).unwrap().display()))
        })
        .collect();
    assert!(long.is_empty(), "over {MAX_LINES} lines: {long:?}");
}

/// The crate root's public names, the user's API: each is imported here,
/// so that the list compiles only while every name exists, and
/// [`the_crate_root_exports_only_the_listed_names`] checks that `lib.rs`
/// exports no other, so that a new public name takes an edit here. What
/// only the tests and benches use belongs in `timewarp::internals`.
macro_rules! public_names {
    ($($name:ident),* $(,)?) => {
        #[allow(unused_imports)]
        use timewarp::{$($name),*};
        const PUBLIC_NAMES: &[&str] = &[$(stringify!($name)),*];
    };
}

public_names!(
    // Modules.
    data,
    formats,
    gpu,
    internals,
    ndarray,
    oracle,
    search,
    // Distances, neighbours, alignments.
    distance,
    distance_matrix,
    distance_matrix_resident,
    matrix_variant,
    resident_matrix_variant,
    nearest_neighbours,
    Neighbours,
    dtw_path,
    twed_path,
    soft_dtw_alignment,
    Alignment,
    Edit,
    EditPath,
    EditStep,
    // Soft-DTW of paired batches.
    soft_dtw_gradient,
    soft_dtw_gradient_bytes_per_pair,
    soft_dtw_pairs,
    soft_dtw_pairs_gradient,
    soft_dtw_pairs_gradient_resident,
    soft_dtw_pairs_gradient_variant,
    soft_dtw_pairs_resident,
    soft_dtw_pairs_variant,
    soft_dtw_pairs_on_device,
    soft_dtw_device_output_len,
    DeviceBatchRef,
    SoftDtwOutputs,
    BatchGradient,
    SoftDtwGradient,
    // Inputs, options, measures, results.
    SeriesSet,
    upload,
    ResidentSet,
    ComputeOptions,
    Device,
    GpuSet,
    Placement,
    Variant,
    Backend,
    Dtw,
    Metric,
    SoftDtw,
    Twed,
    Float,
    Precision,
    Error,
    DriverError,
    Result,
    interrupt,
);

/// The public names `lib.rs` declares: its `pub mod`s, the last name of
/// each path its `pub use`s export, and its public items (but those only
/// doc tests see).
fn crate_root_names() -> BTreeSet<String> {
    let text = std::fs::read_to_string(repository().join("host/lib.rs")).unwrap();
    let code = code(&text);
    let mut names: BTreeSet<String> = uses(&code)
        .into_iter()
        .filter(|(public, _)| *public)
        .flat_map(|(_, paths)| paths)
        .map(|path| path.rsplit("::").next().unwrap().trim().to_string())
        .collect();
    let mut cfg_doctest = false;
    for line in code.lines().map(str::trim) {
        if line.starts_with("#[cfg(doctest)]") {
            cfg_doctest = true;
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.first() == Some(&"pub") && words.len() > 2 && words[1] != "use" {
            if !cfg_doctest {
                let name = words[2].trim_end_matches([';', '{', '(', '<', ':']);
                names.insert(name.to_string());
            }
            cfg_doctest = false;
        }
    }
    names
}

#[test]
fn the_crate_root_exports_only_the_listed_names() {
    let listed: BTreeSet<String> = PUBLIC_NAMES.iter().map(|s| s.to_string()).collect();
    assert_eq!(listed.len(), PUBLIC_NAMES.len(), "a name listed twice");
    let exported = crate_root_names();
    let unlisted: Vec<_> = exported.difference(&listed).collect();
    let missing: Vec<_> = listed.difference(&exported).collect();
    assert!(
        unlisted.is_empty() && missing.is_empty(),
        "the crate root's public names differ from PUBLIC_NAMES: exported but not \
         listed {unlisted:?}, listed but not exported {missing:?} (test and bench \
         internals go to `timewarp::internals`)"
    );
}
