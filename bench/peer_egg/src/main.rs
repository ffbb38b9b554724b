// egg-ac: equality saturation of associativity and commutativity of + and
// * over a left-nested sum (or product, alternately) of n leaves, as
// relgraph's `bench_search growth-pattern` does: the same four rules, every
// rule applied every iteration (SimpleScheduler, no backoff), node limit
// 200000.  Prints, per n, the final e-graph and the median wall time of six
// runs of Runner::run.
use egg::*;
use std::time::Instant;

fn nested(op: &str, n: usize) -> RecExpr<SymbolLang> {
    let mut s = String::from("x0");
    for i in 1..n {
        s = format!("({} {} x{})", op, s, i);
    }
    s.parse().unwrap()
}

fn main() {
    let rules: Vec<Rewrite<SymbolLang, ()>> = vec![
        rewrite!("add-comm"; "(+ ?a ?b)" => "(+ ?b ?a)"),
        rewrite!("add-assoc"; "(+ (+ ?a ?b) ?c)" => "(+ ?a (+ ?b ?c))"),
        rewrite!("mul-comm"; "(* ?a ?b)" => "(* ?b ?a)"),
        rewrite!("mul-assoc"; "(* (* ?a ?b) ?c)" => "(* ?a (* ?b ?c))"),
    ];
    let reps = 6;
    for n in [8usize, 10, 12] {
        let mut times = Vec::new();
        let mut last = String::new();
        for i in 0..reps {
            let e = nested(if i % 2 == 0 { "+" } else { "*" }, n);
            let runner = Runner::default()
                .with_scheduler(SimpleScheduler)
                .with_node_limit(200_000)
                .with_iter_limit(1000)
                .with_expr(&e);
            let t0 = Instant::now();
            let runner = runner.run(&rules);
            times.push(t0.elapsed().as_secs_f64());
            last = format!(
                "egg {:>2} leaves: {} e-nodes, {} e-classes, {} iterations, stop {:?}",
                n,
                runner.egraph.total_number_of_nodes(),
                runner.egraph.number_of_classes(),
                runner.iterations.len(),
                runner.stop_reason
            );
        }
        times.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let median = (times[reps / 2 - 1] + times[reps / 2]) / 2.0;
        println!("{}: median {:.4} s", last, median);
    }
}
