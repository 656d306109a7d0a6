//! Schedule pictures: `Schedule::to_dot`, `smelt::viz` with an explicit
//! directory, and `SMELT_VIZ`. The environment is process-wide and read
//! once, so the `SMELT_VIZ` tests run this test binary again as a child
//! with the variable set, in which `child_realizes` does the realizes.

use smelt::{viz, Device, Fusion, Tensor};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Set in the child process the `SMELT_VIZ` tests start.
const CHILD: &str = "SMELT_VIZ_TEST_CHILD";

fn has_dot() -> bool {
    Command::new("dot").arg("-V").output().is_ok()
}

/// A fresh directory under the system's temp dir.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("smelt-viz-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Data (not a lazy `randn`, whose generator would join the pictured
/// schedules): varied values in `[-2, 2)`.
fn softmax_input() -> Tensor {
    let v: Vec<f32> = (0..128)
        .map(|i| ((i * 37) % 16) as f32 * 0.25 - 2.0)
        .collect();
    Tensor::from_vec(v, [8, 16], &Device::Cpu)
}

#[test]
fn to_dot_from_the_tensor_api() {
    let x = softmax_input();
    let before = smelt::stats::kernels_run();
    let fused = x.softmax(-1).schedule(Fusion::On).to_dot();
    assert_eq!(fused.matches("subgraph cluster_k").count(), 1, "{fused}");
    assert!(fused.contains("max → sub → exp → sum → div"), "{fused}");
    assert!(fused.contains("kept [8] · reduced [16]"), "{fused}");
    let unfused = x.softmax(-1).schedule(Fusion::Off).to_dot();
    assert_eq!(
        unfused.matches("subgraph cluster_k").count(),
        5,
        "{unfused}"
    );
    // Nothing ran: a schedule is only a plan.
    assert_eq!(smelt::stats::kernels_run(), before);
}

#[test]
fn explicit_directory() {
    let dir = scratch("explicit");
    let y = softmax_input().softmax(-1);
    let dot = viz::write_dot(&dir, &y.schedule(Fusion::On)).unwrap();
    let name = dot.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with("realize-") && name.ends_with(".dot") && name.len() == 18,
        "{name}"
    );
    assert!(std::fs::read_to_string(&dot)
        .unwrap()
        .starts_with("digraph schedule {"));
    match viz::render_svg(&dot).unwrap() {
        Some(svg) => {
            assert_eq!(svg, dot.with_extension("svg"));
            assert!(std::fs::read_to_string(svg).unwrap().contains("<svg"));
        }
        None => assert!(!has_dot(), "dot is on PATH but nothing was rendered"),
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// Runs this binary's `child_realizes` with `SMELT_VIZ=viz` and `env`;
/// returns its stderr.
fn run_child(viz: &Path, env: &[(&str, &str)]) -> String {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = Command::new(exe);
    cmd.args([
        "--exact",
        "child_realizes",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD, "1")
    .env("SMELT_VIZ", viz)
    .env("SMELT_DEVICE", "cpu")
    .env("SMELT_DEBUG", "0");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "child failed:\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("1 passed"),
        "the child test did not run:\n{stdout}"
    );
    stderr
}

/// The child's part: three realizes (the third has nothing left to run),
/// whose results must be right whatever happens to the pictures.
#[test]
fn child_realizes() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let x = softmax_input();
    let y = x.softmax(-1);
    y.realize().unwrap();
    let rows = y.sum(1).to_vec::<f32>().unwrap();
    assert!(rows.iter().all(|r| (r - 1.0).abs() < 1e-5), "{rows:?}");
    y.realize().unwrap(); // already realized: no kernel, no picture
}

#[test]
fn smelt_viz_writes_a_picture_per_realize() {
    let dir = scratch("env");
    let stderr = run_child(&dir, &[]);
    let mut want = vec!["realize-000000.dot", "realize-000001.dot"];
    if has_dot() {
        want.extend(["realize-000000.svg", "realize-000001.svg"]);
        assert!(!stderr.contains("SMELT_VIZ"), "{stderr}");
    }
    want.sort();
    assert_eq!(files(&dir), want, "{stderr}");
    let first = std::fs::read_to_string(dir.join("realize-000000.dot")).unwrap();
    assert!(first.contains("#0 multireduce"), "{first}");
    let second = std::fs::read_to_string(dir.join("realize-000001.dot")).unwrap();
    assert!(second.contains("#0 reduce"), "{second}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn without_graphviz_only_dot_files_and_one_warning() {
    let dir = scratch("no-dot");
    let empty = scratch("no-dot-path");
    std::fs::create_dir_all(&empty).unwrap();
    let stderr = run_child(&dir, &[("PATH", empty.to_str().unwrap())]);
    assert_eq!(
        files(&dir),
        ["realize-000000.dot", "realize-000001.dot"],
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("`dot` is not on PATH").count(),
        1,
        "{stderr}"
    );
    std::fs::remove_dir_all(dir).unwrap();
    std::fs::remove_dir_all(empty).unwrap();
}

#[test]
fn an_unwritable_directory_never_fails_a_realize() {
    // A directory below a plain file cannot be created.
    let base = scratch("unwritable");
    std::fs::create_dir_all(&base).unwrap();
    let file = base.join("file");
    std::fs::write(&file, "not a directory").unwrap();
    let stderr = run_child(&file.join("viz"), &[]);
    assert_eq!(
        stderr.matches("SMELT_VIZ: cannot write into").count(),
        1,
        "{stderr}"
    );
    std::fs::remove_dir_all(base).unwrap();
}
