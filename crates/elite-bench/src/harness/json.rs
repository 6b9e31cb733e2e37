//! The JSON document of a run (its fields are described in `docs/bench-json.md`).

use serde_json::{json, Map, Value};

use super::model::{Bound, Judged, Judgement, Outcome, Params, Ratio, SuiteResults, Target};
use super::report::judge;
use crate::machine::Machine;

impl Params {
    /// The JSON object of the parameters.
    fn to_json(&self) -> Value {
        let mut object = Map::new();
        object.insert("processors".into(), json!(self.processors));
        for (name, value) in &self.values {
            object.insert((*name).into(), value.clone());
        }
        Value::Object(object)
    }
}

impl Bound {
    /// `{"kind": "at_least", "value": 1.3}`.
    fn to_json(self) -> Value {
        let (kind, value) = match self {
            Bound::AtLeast(value) => ("at_least", value),
            Bound::AtMost(value) => ("at_most", value),
        };
        json!({ "kind": kind, "value": value })
    }
}

impl Judged {
    /// One subject of a target: the system, what it was compared with, and the estimate (the
    /// median of the per-round ratios with their range, 95% interval and count; the ratio of
    /// medians, without any; or a ratio of values measured once), with its own verdict.
    fn to_json(&self) -> Value {
        let (estimate, median, min, max, interval, rounds) = match self.ratio {
            Ratio::Paired { median, min, max, interval, rounds } => {
                ("paired", median, Some(min), Some(max), interval, Some(rounds))
            }
            Ratio::OfMedians(ratio) => ("ratio_of_medians", ratio, None, None, None, None),
            Ratio::Once(ratio) => ("once", ratio, Some(ratio), Some(ratio), None, Some(1)),
        };
        json!({
            "system": self.system,
            "baseline": self.baseline,
            "estimate": estimate,
            "median": median,
            "min": min,
            "max": max,
            "interval": interval.map(|(lo, hi)| [lo, hi]),
            "rounds": rounds,
            "met": self.verdict.met,
            "certainty": self.verdict.certainty.name(),
        })
    }
}

/// A target of `bench` (whose rows are in `metric`) as the document records it: what it claims
/// and its judgement.
fn target_json(bench: &str, metric: &str, target: &Target, judgement: &Judgement) -> Value {
    let (state, verdict) = match judgement.outcome {
        Outcome::Judged(v) => ("judged", Some(v)),
        Outcome::Failed => ("failed", None),
        Outcome::Skipped => ("skipped", None),
    };
    json!({
        "bench": bench,
        "kind": target.kind(),
        "metric": metric,
        "params": target.params(),
        "bound": target.bound().to_json(),
        "text": judgement.text,
        "state": state,
        "met": verdict.map(|v| v.met),
        "certainty": verdict.map(|v| v.certainty.name()),
        "best": judgement.best,
        "subjects": judgement.subjects.iter().map(Judged::to_json).collect::<Vec<_>>(),
    })
}

/// The JSON document of a suite's run, as `docs/bench-json.md` describes it.
pub fn json_document(suite: &str, machine: &Machine, results: &SuiteResults) -> Value {
    let rows: Vec<Value> = results
        .benches
        .iter()
        .flat_map(|b| b.rows.iter().map(move |row| (b, row)))
        .map(|(bench, row)| {
            let mut object = json!({
                "bench": row.bench,
                "system": row.system,
                "metric": row.metric.name(),
                "median": row.median(),
                "min": row.min(),
                "max": row.max(),
                "runs": row.samples.len(),
                "rounds": row.rounds,
                "bench_rounds": bench.rounds,
                "stopped": bench.stop.name(),
                "core_round_trip_ns": bench.core_round_trip_ns.map(|ns| ns.map(|ns| (ns * 10.0).round() / 10.0)),
                "ok": row.ok(),
                "params": row.params.to_json(),
            });
            if let (Some(why), Value::Object(map)) = (&row.failure, &mut object) {
                map.insert("error".into(), json!(why));
            }
            object
        })
        .collect();
    let targets: Vec<Value> = results
        .benches
        .iter()
        .flat_map(|bench| {
            let judgements = judge(bench);
            bench
                .targets
                .iter()
                .zip(judgements)
                .map(|(target, judgement)| target_json(bench.name, bench.metric.name(), target, &judgement))
                .collect::<Vec<_>>()
        })
        .collect();
    json!({
        "suite": suite,
        "machine": machine.to_json(),
        "results": rows,
        "targets": targets,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::model::{row, BenchResult, Metric, Stop};

    /// The names of an object's fields, sorted.
    fn keys(value: &Value) -> Vec<&str> {
        let mut keys: Vec<&str> = value.as_object().expect("an object").keys().map(String::as_str).collect();
        keys.sort_unstable();
        keys
    }

    #[test]
    fn the_document_has_the_fields_of_its_contract() {
        let mut failed = row(&[]);
        failed.failure = Some("wrong answer 4 (expected 3)".into());
        failed.params = Params::new(2).with("n", 10).with_text("regime", "short");
        let results = SuiteResults {
            benches: vec![BenchResult {
                name: "b",
                metric: Metric::NsPerOp,
                rows: vec![row(&[2.0, 3.0, 1.0]), failed],
                targets: Vec::new(),
                rounds: 3,
                stop: Stop::Decided,
                core_round_trip_ns: [Some(48.04), None],
            }],
        };
        let machine = Machine {
            cpus: 2,
            cpu_model: "x".into(),
            pmu: false,
            kernel: "k".into(),
            l2_bytes: Some(1 << 20),
            l3_bytes: None,
            line_costs: Some(crate::machine::LineCosts {
                round_trip_ns: 150.0,
                fetch_ns: 10.0,
                hand_off_lines: 45.0,
            }),
            sched_policy: "fifo 10".into(),
        };
        let doc = json_document("micro", &machine, &results);
        assert_eq!(keys(&doc), ["machine", "results", "suite", "targets"]);
        assert_eq!(doc["targets"], json!([]));
        assert_eq!(
            keys(&doc["machine"]),
            [
                "cpu_model",
                "cpus",
                "hand_off_lines",
                "kernel",
                "l2_bytes",
                "l3_bytes",
                "line_fetch_ns",
                "line_round_trip_ns",
                "pmu",
                "sched_policy"
            ]
        );
        assert_eq!(doc["machine"]["sched_policy"], json!("fifo 10"));
        assert_eq!(
            (doc["machine"]["line_round_trip_ns"].clone(), doc["machine"]["hand_off_lines"].clone()),
            (json!(150.0), json!(45.0))
        );
        assert_eq!(doc["machine"]["l2_bytes"], json!(1 << 20));
        assert_eq!(doc["machine"]["l3_bytes"], json!(null));
        let row_fields = [
            "bench",
            "bench_rounds",
            "core_round_trip_ns",
            "max",
            "median",
            "metric",
            "min",
            "ok",
            "params",
            "rounds",
            "runs",
            "stopped",
            "system",
        ];
        assert_eq!(keys(&doc["results"][0]), row_fields);
        assert_eq!(doc["results"][0]["median"], json!(2.0));
        assert_eq!(doc["results"][0]["runs"], json!(3));
        // The samples in the order of their rounds, besides the summary of the sorted ones.
        assert_eq!(doc["results"][0]["rounds"], json!([2.0, 3.0, 1.0]));
        assert_eq!(
            (doc["results"][0]["min"].clone(), doc["results"][0]["max"].clone()),
            (json!(1.0), json!(3.0))
        );
        assert_eq!(doc["results"][0]["metric"], json!("ns_per_op"));
        // The bench's measured rounds and why it ran no more, in each of its rows.
        assert_eq!(doc["results"][1]["bench_rounds"], json!(3));
        assert_eq!(doc["results"][1]["stopped"], json!("decided"));
        // The core-to-core round trip before and after the bench, to a tenth of a nanosecond;
        // null where unmeasured.
        assert_eq!(doc["results"][1]["core_round_trip_ns"], json!([48.0, null]));
        let mut failed_fields = row_fields.to_vec();
        failed_fields.insert(3, "error");
        assert_eq!(keys(&doc["results"][1]), failed_fields);
        assert_eq!(doc["results"][1]["ok"], json!(false));
        assert_eq!(doc["results"][1]["params"], json!({"processors": 2, "n": 10, "regime": "short"}));
    }
}
