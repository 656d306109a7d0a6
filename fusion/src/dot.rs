//! Graphviz pictures of a schedule: [`Schedule::to_dot`].
//!
//! One cluster per kernel holds a header (kind, domain, bytes moved, fused
//! ops) and the chain of graph ops the kernel computes in order; edges
//! between clusters are the buffers of the kernel DAG (fusion/src/dag.rs),
//! labelled with dtype, elements and bytes. Realized inputs and results are
//! separate nodes. Labels are HTML labels (text escaped) or quoted strings
//! (quotes and backslashes escaped).

use crate::dag::DagNode;
use crate::schedule::{BufferSpec, Schedule, ScheduleItem};
use petgraph::visit::EdgeRef;
use smelt_codegen::DType;
use std::fmt::Write;

/// Op nodes drawn per kernel cluster; longer chains show their first and
/// last ops around a "more" node.
const MAX_CHAIN: usize = 24;

/// Ops listed in a kernel's header; more are summarised by a count.
const MAX_LISTED: usize = 40;

/// Ops per line of a header's op list.
const OPS_PER_LINE: usize = 8;

/// Op nodes per row of a drawn chain (rows snake down the cluster).
const CHAIN_ROW: usize = 6;

impl Schedule {
    /// The kernel DAG as Graphviz DOT (`dot -Tsvg` draws it).
    ///
    /// Each kernel is a cluster `cluster_k<i>` with a header (index, kind,
    /// domain as kept and reduced loop ranges, bytes read and written, the
    /// fused ops) above the chain of ops it computes, in evaluation order.
    /// Edges are buffers (dtype, elements, bytes) from the kernel or input
    /// that holds them to the kernels that read them and to the results.
    ///
    /// ```
    /// use smelt_codegen::{dims, DType, ReduceOp, UnaryOp};
    /// use smelt_fusion::{Fusion, Node, Op, Schedule};
    /// use std::sync::Arc;
    ///
    /// let x = Node::buffer(Arc::new(()), vec![4, 8], DType::F32);
    /// let e = Node::new(Op::Unary(UnaryOp::Exp, x), vec![4, 8], DType::F32);
    /// let s = Node::new(Op::Reduce(ReduceOp::Sum, e, dims![1]), vec![4, 1], DType::F32);
    /// let dot = Schedule::plan(&[s], Fusion::On).to_dot();
    /// assert!(dot.starts_with("digraph schedule {"));
    /// assert!(dot.contains("subgraph cluster_k0"));
    /// ```
    pub fn to_dot(&self) -> String {
        let mut out = String::new();
        self.write_dot(&mut out)
            .expect("writing to a String cannot fail");
        out
    }

    fn write_dot(&self, o: &mut String) -> std::fmt::Result {
        let info = buffer_info(self);
        writeln!(o, "digraph schedule {{")?;
        writeln!(
            o,
            "  graph [rankdir=TB, compound=true, newrank=true, nodesep=0.35, ranksep=0.45, \
             fontname=\"Helvetica\", fontsize=12, labelloc=t, label={}];",
            quote(&format!(
                "{} kernel{}, {} read, {} written",
                self.items.len(),
                if self.items.len() == 1 { "" } else { "s" },
                bytes(self.bytes_read()),
                bytes(self.bytes_written())
            ))
        )?;
        writeln!(o, "  node [fontname=\"Helvetica\", fontsize=10];")?;
        writeln!(
            o,
            "  edge [fontname=\"Helvetica\", fontsize=9, color=\"#4b5563\", fontcolor=\"#374151\"];"
        )?;
        let dag = self.dag();
        let g = dag.graph();
        // Inputs, results and the odd unread or missing buffer.
        for n in g.node_weights() {
            let (id, title, fill, style) = match *n {
                DagNode::Kernel(_) => continue,
                DagNode::Input(b) => (format!("b{b}"), "input", "#dbeafe", "rounded,filled"),
                DagNode::Result(b) => (format!("r{b}"), "result", "#dcfce7", "rounded,filled"),
                DagNode::Unread(b) => (
                    format!("u{b}"),
                    "written, never read",
                    "#f3f4f6",
                    "rounded,filled,dashed",
                ),
                DagNode::Missing(b) => (
                    format!("m{b}"),
                    "read, never written",
                    "#fee2e2",
                    "rounded,filled,bold",
                ),
            };
            let b = buffer_of(n);
            let mut label = format!("<b>{}</b> buffer {b}", html(title));
            if let DagNode::Result(_) = n {
                for (node, _) in self.results.iter().filter(|(_, rb)| *rb == b) {
                    let _ = write!(
                        label,
                        "<br/>{} {} (node {})",
                        node.dtype().short_name(),
                        html(&format!("{:?}", node.shape())),
                        node.id()
                    );
                }
            } else if let BufferSpec::Realized { node, .. } = &self.buffers[b] {
                let _ = write!(label, "<br/>node {node}");
            }
            writeln!(
                o,
                "  {id} [shape=box, style=\"{style}\", fillcolor=\"{fill}\", label=<{label}>];"
            )?;
        }
        for (k, it) in self.items.iter().enumerate() {
            write_kernel(o, k, it)?;
        }
        // Buffers: from the last op of a writer's cluster to the header of
        // a reader's.
        for e in g.edge_references() {
            let b = e.weight().buffer;
            let (from, ltail) = match g[e.source()] {
                DagNode::Kernel(i) => (chain_tail(i, &self.items[i]), format!("cluster_k{i}")),
                other => (endpoint(other), String::new()),
            };
            let (to, lhead) = match g[e.target()] {
                DagNode::Kernel(j) => (format!("k{j}"), format!("cluster_k{j}")),
                other => (endpoint(other), String::new()),
            };
            let mut attrs = Vec::new();
            if let Some(i) = info[b] {
                attrs.push(format!("label={}", quote(&format!("#{b} {}", describe(i)))));
            }
            if !ltail.is_empty() {
                attrs.push(format!("ltail={ltail}"));
            }
            if !lhead.is_empty() {
                attrs.push(format!("lhead={lhead}"));
            }
            writeln!(o, "  {from} -> {to} [{}];", attrs.join(", "))?;
        }
        writeln!(o, "}}")
    }
}

/// The cluster of kernel `k`: its header and its op chain.
fn write_kernel(o: &mut String, k: usize, it: &ScheduleItem) -> std::fmt::Result {
    let kern = &it.kernel;
    let kind = kern.kind.name();
    writeln!(o, "  subgraph cluster_k{k} {{")?;
    writeln!(
        o,
        "    style=\"rounded,filled\"; fillcolor=\"#f9fafb\"; color=\"#9ca3af\"; label=\"\";"
    )?;
    let (kept, reduced) = kern.ranges.split_at(kern.n_kept.min(kern.ranges.len()));
    let mut domain = format!("kept {}", ranges(kept));
    if !reduced.is_empty() {
        let _ = write!(domain, " · reduced {}", ranges(reduced));
    }
    let mut listed: Vec<String> = it.ops.iter().take(MAX_LISTED).map(|s| html(s)).collect();
    if it.ops.len() > MAX_LISTED {
        listed.push(format!("… ({} ops)", it.ops.len()));
    }
    let ops = listed
        .chunks(OPS_PER_LINE)
        .map(|c| c.join(" → "))
        .collect::<Vec<_>>()
        .join("<br/>");
    writeln!(
        o,
        "    k{k} [shape=plain, label=<<table border=\"0\" cellborder=\"1\" cellspacing=\"0\" \
         cellpadding=\"4\" bgcolor=\"white\">\
         <tr><td bgcolor=\"{}\"><b>#{k} {}</b></td></tr>\
         <tr><td align=\"left\">{}</td></tr>\
         <tr><td align=\"left\">read {} · written {}</td></tr>\
         <tr><td align=\"left\">{}</td></tr></table>>];",
        kind_color(kind),
        html(kind),
        html(&domain),
        bytes(kern.bytes_read()),
        bytes(kern.bytes_written()),
        if ops.is_empty() {
            "(no ops)".into()
        } else {
            ops
        }
    )?;
    // The op chain, shortened around a "more" node when long.
    let n = it.ops.len();
    let shown: Vec<(String, String)> = if n <= MAX_CHAIN {
        it.ops
            .iter()
            .enumerate()
            .map(|(j, op)| (format!("k{k}_{j}"), quote(op)))
            .collect()
    } else {
        let head = MAX_CHAIN / 2;
        let tail = MAX_CHAIN - head - 1;
        let mut v: Vec<(String, String)> = (0..head)
            .map(|j| (format!("k{k}_{j}"), quote(&it.ops[j])))
            .collect();
        v.push((
            format!("k{k}_more"),
            quote(&format!("… {} more", n - head - tail)),
        ));
        v.extend((n - tail..n).map(|j| (format!("k{k}_{j}"), quote(&it.ops[j]))));
        v
    };
    for (id, label) in &shown {
        writeln!(
            o,
            "    {id} [shape=box, style=\"rounded,filled\", fillcolor=\"white\", color=\"#d1d5db\", \
             fontsize=9, height=0.22, margin=\"0.08,0.02\", label={label}];"
        )?;
    }
    // Rows of the chain side by side, the next row below.
    for row in shown.chunks(CHAIN_ROW).filter(|r| r.len() > 1) {
        let ids: Vec<&str> = row.iter().map(|(id, _)| id.as_str()).collect();
        writeln!(o, "    {{ rank=same; {}; }}", ids.join("; "))?;
    }
    let mut prev = format!("k{k}");
    for (j, (id, _)) in shown.iter().enumerate() {
        let style = if j == 0 {
            "style=invis"
        } else {
            "color=\"#9ca3af\", arrowsize=0.5"
        };
        writeln!(o, "    {prev} -> {id} [{style}];")?;
        prev = id.clone();
    }
    writeln!(o, "  }}")
}

/// The DOT id of the node buffers leave kernel `k` from: the last node of
/// its op chain, else its header.
fn chain_tail(k: usize, it: &ScheduleItem) -> String {
    match it.ops.len() {
        0 => format!("k{k}"),
        n => format!("k{k}_{}", n - 1),
    }
}

/// The DOT id of a non-kernel node.
fn endpoint(n: DagNode) -> String {
    match n {
        DagNode::Kernel(k) => format!("k{k}"),
        DagNode::Input(b) => format!("b{b}"),
        DagNode::Result(b) => format!("r{b}"),
        DagNode::Unread(b) => format!("u{b}"),
        DagNode::Missing(b) => format!("m{b}"),
    }
}

fn buffer_of(n: &DagNode) -> usize {
    match *n {
        DagNode::Kernel(_) => unreachable!("kernels are not buffers"),
        DagNode::Input(b) | DagNode::Result(b) | DagNode::Unread(b) | DagNode::Missing(b) => b,
    }
}

/// Dtype and length of every buffer: new buffers from their spec,
/// realized ones from the argument of a kernel that binds them.
fn buffer_info(s: &Schedule) -> Vec<Option<(DType, usize)>> {
    let mut info: Vec<Option<(DType, usize)>> = s
        .buffers
        .iter()
        .map(|b| match b {
            BufferSpec::New { dtype, len } => Some((*dtype, *len)),
            BufferSpec::Realized { .. } => None,
        })
        .collect();
    for it in s.items.iter() {
        let bound = it
            .inputs
            .iter()
            .zip(&it.kernel.inputs)
            .chain(it.outputs.iter().zip(&it.kernel.outputs));
        for (b, arg) in bound {
            info[*b].get_or_insert((arg.dtype, arg.len));
        }
    }
    info
}

/// `f32 · 4,194,304 (16.0 MiB)`.
fn describe((dtype, len): (DType, usize)) -> String {
    format!(
        "{} · {} ({})",
        dtype.short_name(),
        thousands(len),
        bytes(len.saturating_mul(dtype.size()))
    )
}

/// `[4096]`, `[8 × 512]`, `[]` for no axes.
fn ranges(r: &[i64]) -> String {
    let parts: Vec<String> = r.iter().map(|n| thousands(*n as usize)).collect();
    format!("[{}]", parts.join(" × "))
}

fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        let left = digits.len() - i;
        if i > 0 && left.is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Bytes in B, KiB, MiB or GiB.
fn bytes(n: usize) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

fn kind_color(kind: &str) -> &'static str {
    match kind {
        "elementwise" => "#e0e7ff",
        "reduce" => "#fef3c7",
        "multireduce" => "#fde68a",
        "matmul" => "#fbcfe8",
        _ => "#e5e7eb",
    }
}

/// Text for an HTML label: `&`, `<`, `>` and `"` as entities.
pub fn html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\n' => out.push_str("<br/>"),
            c => out.push(c),
        }
    }
    out
}

/// A DOT quoted string: quotes and backslashes escaped, newlines as `\n`.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dag::KernelDag;
    use crate::graph::{Node, NodeRef, Op};
    use crate::schedule::Fusion;
    use smelt_codegen::{BinaryOp, ReduceOp, UnaryOp};
    use std::sync::Arc;

    fn input(shape: &[usize]) -> NodeRef {
        Node::buffer(Arc::new(()), shape.to_vec(), DType::F32)
    }

    /// `softmax(x, axis 1)` as the tensor API records it (without casts).
    fn softmax(x: &NodeRef) -> NodeRef {
        let shape = x.shape().to_vec();
        let rows = vec![shape[0], 1];
        let bcast = |r: NodeRef| {
            let st = crate::view::ShapeTracker::contiguous(&rows).expand(&shape);
            Node::new(Op::View(r, Arc::new(st)), shape.clone(), DType::F32)
        };
        let m = Node::new(
            Op::Reduce(ReduceOp::Max, x.clone(), smelt_codegen::dims![1]),
            rows.clone(),
            DType::F32,
        );
        let d = Node::new(
            Op::Binary(BinaryOp::Sub, x.clone(), bcast(m)),
            shape.clone(),
            DType::F32,
        );
        let e = Node::new(Op::Unary(UnaryOp::Exp, d), shape.clone(), DType::F32);
        let s = Node::new(
            Op::Reduce(ReduceOp::Sum, e.clone(), smelt_codegen::dims![1]),
            rows.clone(),
            DType::F32,
        );
        Node::new(Op::Binary(BinaryOp::Div, e, bcast(s)), shape, DType::F32)
    }

    #[test]
    fn fused_softmax_is_one_cluster() {
        let x = input(&[64, 32]);
        let s = Schedule::plan(&[softmax(&x)], Fusion::On);
        let dot = s.to_dot();
        assert_eq!(s.items.len(), 1, "{s}");
        assert!(dot.contains("subgraph cluster_k0 {"), "{dot}");
        assert!(!dot.contains("cluster_k1"), "{dot}");
        assert!(dot.contains("#0 multireduce"), "{dot}");
        assert!(dot.contains("kept [64] · reduced [32]"), "{dot}");
        assert!(dot.contains("max → sub → exp → sum → div"), "{dot}");
        for op in ["max", "sub", "exp", "sum", "div"] {
            assert!(dot.contains(&format!("label=\"{op}\"")), "{op}: {dot}");
        }
        // 64 * 32 f32 in and out.
        assert!(dot.contains("read 8.0 KiB · written 8.0 KiB"), "{dot}");
        assert!(dot.contains("<b>input</b>"), "{dot}");
        assert!(dot.contains("<b>result</b>"), "{dot}");
        assert!(dot.contains("f32 · 2,048 (8.0 KiB)"), "{dot}");
        assert!(dot.contains("f32 [64, 32]"), "{dot}");
    }

    #[test]
    fn unfused_softmax_has_a_cluster_per_kernel() {
        let x = input(&[64, 32]);
        let s = Schedule::plan(&[softmax(&x)], Fusion::Off);
        let dot = s.to_dot();
        assert_eq!(s.items.len(), 5, "{s}");
        for k in 0..5 {
            assert!(dot.contains(&format!("subgraph cluster_k{k} {{")), "{dot}");
            assert!(dot.contains(&format!("#{k} ")), "{dot}");
        }
        // Kernel edges: max -> sub, sub -> exp, exp -> sum and div, sum -> div.
        for (i, j) in [(0, 1), (1, 2), (2, 3), (2, 4), (3, 4)] {
            let e = format!("ltail=cluster_k{i}, lhead=cluster_k{j}");
            assert!(dot.contains(&e), "{e}: {dot}");
        }
        // The max and sum rows are 64 floats.
        assert!(dot.contains("f32 · 64 (256 B)"), "{dot}");
        let buffer_edges = dot.lines().filter(|l| l.contains("[label=\"#")).count();
        assert_eq!(buffer_edges, s.dag().graph().edge_count(), "{dot}");
    }

    #[test]
    fn labels_are_escaped() {
        use crate::dag::tests::{item, new_buf, realized};
        let items = vec![
            item(&["<a&b>", "say \"hi\"", "back\\slash"], &[0], &[1]),
            item(&["x>y"], &[1], &[2]),
        ];
        let buffers = vec![realized(), new_buf(), new_buf()];
        let dag = Arc::new(KernelDag::new(&items, &buffers, &[2]));
        let s = Schedule {
            items: Arc::new(items),
            buffers,
            scalars: vec![],
            results: vec![],
            dag,
        };
        let dot = s.to_dot();
        // HTML labels (the headers) use entities.
        assert!(
            dot.contains("&lt;a&amp;b&gt; → say &quot;hi&quot;"),
            "{dot}"
        );
        assert!(dot.contains("x&gt;y"), "{dot}");
        // Quoted labels (the op chain) escape quotes and backslashes.
        assert!(dot.contains(r#"label="<a&b>""#), "{dot}");
        assert!(dot.contains(r#"label="say \"hi\"""#), "{dot}");
        assert!(dot.contains(r#"label="back\\slash""#), "{dot}");
        // No raw markup from the op names reaches an HTML label.
        let header = dot.lines().find(|l| l.contains("k0 [shape=plain")).unwrap();
        assert!(
            !header.contains("<a&b>") && !header.contains("\"hi\""),
            "{header}"
        );
        assert_eq!(html("<>&\""), "&lt;&gt;&amp;&quot;");
        assert_eq!(quote("a\"b\\c\nd"), r#""a\"b\\c\nd""#);
    }

    #[test]
    fn long_chains_are_shortened() {
        use crate::dag::tests::{item, new_buf, realized};
        let ops: Vec<String> = (0..100).map(|i| format!("op{i}")).collect();
        let names: Vec<&str> = ops.iter().map(|s| s.as_str()).collect();
        let items = vec![item(&names, &[0], &[1])];
        let buffers = vec![realized(), new_buf()];
        let dag = Arc::new(KernelDag::new(&items, &buffers, &[1]));
        let s = Schedule {
            items: Arc::new(items),
            buffers,
            scalars: vec![],
            results: vec![],
            dag,
        };
        let dot = s.to_dot();
        assert!(dot.contains("… 77 more"), "{dot}");
        assert!(dot.contains("… (100 ops)"), "{dot}");
        assert!(dot.contains("k0_99 -> r1"), "{dot}");
        assert!(!dot.contains("label=\"op50\""), "{dot}");
    }

    #[test]
    fn numbers() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(4194304), "4,194,304");
        assert_eq!(bytes(100), "100 B");
        assert_eq!(bytes(16 << 20), "16.0 MiB");
        assert_eq!(bytes(3 << 30), "3.0 GiB");
        assert_eq!(ranges(&[8, 512]), "[8 × 512]");
    }

    /// When Graphviz is installed, it accepts what `to_dot` writes.
    #[test]
    fn graphviz_parses_it() {
        let x = input(&[16, 8]);
        let y = softmax(&x);
        for mode in [Fusion::On, Fusion::Off] {
            let dot = Schedule::plan(std::slice::from_ref(&y), mode).to_dot();
            let child = std::process::Command::new("dot")
                .arg("-Tsvg")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn();
            let Ok(mut child) = child else {
                eprintln!("graphviz_parses_it: no `dot` on PATH, skipped");
                return;
            };
            use std::io::Write as _;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(dot.as_bytes())
                .unwrap();
            let out = child.wait_with_output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{err}\n{dot}");
            assert!(err.trim().is_empty(), "warnings: {err}\n{dot}");
            assert!(String::from_utf8_lossy(&out.stdout).contains("<svg"));
        }
    }
}
