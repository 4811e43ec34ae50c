//! A training loop with a leak, the way Python users meet one: every step builds a computation
//! graph whose forward pass stores hidden activations on its nodes, and a `history` list keeps
//! every step's graph alive (as `total_loss += loss` does in PyTorch). heapdelta prints a line per
//! step and, at the end, what grew and where.
//!
//! ```text
//! cargo run --release --example training_leak            # the leak
//! cargo run --release --example training_leak -- --fixed # activations cleared each step
//! ```

use std::process::ExitCode;

#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();

const HIDDEN: usize = 100;
const BRANCHING: usize = 4;
const DEPTH: usize = 4;
/// Floats in the model's weights, allocated once before training.
const WEIGHTS: usize = 2 << 20;

/// One node of the step's computation graph.
struct Node {
    name: String,
    weight: f32,
    hidden: Option<Vec<f32>>,
    children: Vec<Node>,
}

impl Node {
    fn build(path: &str, depth: usize) -> Node {
        let children = if depth == 0 {
            Vec::new()
        } else {
            (0..BRANCHING)
                .map(|i| Node::build(&format!("{path}.{i}"), depth - 1))
                .collect()
        };
        Node {
            name: path.to_string(),
            weight: 0.5 + path.len() as f32 * 0.01,
            hidden: None,
            children,
        }
    }

    /// Runs the node on `input` and keeps the activation for the backward pass.
    fn forward(&mut self, input: &[f32]) -> f32 {
        let activation: Vec<f32> = input.iter().map(|x| (x * self.weight).tanh()).collect();
        let out = activation.iter().sum::<f32>() / HIDDEN as f32;
        let child_out: f32 = self
            .children
            .iter_mut()
            .map(|c| c.forward(&activation))
            .sum();
        self.hidden = Some(activation);
        out + child_out
    }

    /// Drops the stored activations (what `--fixed` does after each step).
    fn clear_activations(&mut self) {
        self.hidden = None;
        for c in &mut self.children {
            c.clear_activations();
        }
    }

    fn count(&self) -> usize {
        1 + self.children.iter().map(Node::count).sum::<usize>()
    }
}

/// What the loop keeps from each step.
enum Kept {
    /// The whole graph, activations included: the leak.
    Graph(Box<Node>),
    /// Only the loss value.
    Loss(f32),
}

fn train_step(step: usize, fixed: bool, history: &mut Vec<Kept>) -> usize {
    let mut graph = Node::build(&format!("step{step}"), DEPTH);
    let input: Vec<f32> = (0..HIDDEN)
        .map(|i| (i as f32 * 0.37 + step as f32).sin())
        .collect();
    let loss = graph.forward(&input);
    let nodes = graph.count();
    if fixed {
        graph.clear_activations();
        history.push(Kept::Loss(loss));
    } else {
        history.push(Kept::Graph(Box::new(graph)));
    }
    nodes
}

fn main() -> ExitCode {
    let mut fixed = false;
    let mut steps = 10usize;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--fixed" => fixed = true,
            "--steps" => match args.next().and_then(|n| n.parse().ok()) {
                Some(n) if n > 0 => steps = n,
                _ => {
                    eprintln!("training_leak: --steps needs a positive number");
                    return ExitCode::FAILURE;
                }
            },
            other => {
                eprintln!(
                    "training_leak: unknown argument {other:?} (expected --fixed or --steps N)"
                );
                return ExitCode::FAILURE;
            }
        }
    }
    println!(
        "training_leak: {steps} steps, {} ({} nodes per step, {HIDDEN}-float activations)\n",
        if fixed {
            "activations cleared after each step (--fixed)"
        } else {
            "every step's graph kept in `history` (the leak)"
        },
        Node::build("x", DEPTH).count(),
    );
    let model_weights = vec![0.01f32; WEIGHTS];
    let mut history: Vec<Kept> = Vec::with_capacity(steps);
    heapdelta::checkpoint("start");
    for step in 1..=steps {
        train_step(step, fixed, &mut history);
        println!("{}\n", heapdelta::checkpoint(format!("step {step}")));
    }
    let timeline = heapdelta::timeline();
    println!("{timeline}");
    match timeline.between("step 1", &format!("step {steps}")) {
        Ok(whole) => {
            println!("what grew from step 1 to step {steps}:");
            println!("{}", whole.table(heapdelta::By::Type, 8));
            print!("{}", whole.table(heapdelta::By::Site, 8));
        }
        Err(e) => println!("{e}"),
    }
    let graphs: Vec<&str> = history
        .iter()
        .filter_map(|k| match k {
            Kept::Graph(g) => Some(g.name.as_str()),
            Kept::Loss(_) => None,
        })
        .collect();
    let losses: f32 = history
        .iter()
        .map(|k| match k {
            Kept::Graph(g) => g
                .hidden
                .as_ref()
                .map_or(0.0, |h| h.iter().sum::<f32>() / HIDDEN as f32),
            Kept::Loss(l) => *l,
        })
        .sum();
    println!(
        "\nhistory: {} kept graphs ({}), mean loss {:.4}, model {} weights",
        graphs.len(),
        graphs.last().copied().unwrap_or("none"),
        losses / history.len().max(1) as f32,
        model_weights.len()
    );
    ExitCode::SUCCESS
}
