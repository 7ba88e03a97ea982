//! The report is built as data by the bench and drawn by skq-report: the
//! model holds each group's charts with the curves' own points, the
//! over-time strips only where a point has per-interval data, and
//! rendering it draws one figure per chart.

mod common;

use common::{six_mode_sweep, temp_dir, FakeRunner};
use skq_bench::output::{self, RunInfo};
use skq_bench::summary;
use skq_bench::sweep::{self, Outcome, Quiet};
use skq_report::html::Block;
use skq_report::plot::Chart;
use skq_report::result::IntervalPoint;

#[test]
fn the_report_model_holds_each_groups_charts_as_data() {
    let s = six_mode_sweep();
    let dir = temp_dir("report-model");
    let mut records = sweep::run(&s, &dir, &mut FakeRunner::default(), &mut Quiet);
    // Per-interval data on curve 0's points only.
    for r in records.iter_mut().filter(|r| r.curve == 0) {
        if let Outcome::Measured { result, .. } = &mut r.outcome {
            result.intervals = (0..5)
                .map(|i| IntervalPoint {
                    start_s: f64::from(i),
                    offered_rps: 1000.0 + f64::from(i),
                    achieved_rps: 990.0,
                    p50_us: Some(10.0),
                    p99_us: Some(50.0),
                    ..Default::default()
                })
                .collect();
        }
    }
    let sums = summary::summarize(&s, &records);
    let model = output::report_model(&s, &records, &sums, &RunInfo::default());

    let mut groups: Vec<String> = Vec::new();
    for c in &s.curves {
        if !groups.contains(&c.group()) {
            groups.push(c.group());
        }
    }
    assert!(groups.len() >= 2, "the fixture sweep has several groups");
    let charts: Vec<&Chart> = model
        .blocks
        .iter()
        .filter_map(|b| match b {
            Block::Chart { chart, .. } => Some(chart),
            _ => None,
        })
        .collect();
    let p99: Vec<&Chart> = charts
        .iter()
        .copied()
        .filter(|c| matches!(c, Chart::P99VsLoad { .. }))
        .collect();
    let cdf = charts
        .iter()
        .filter(|c| matches!(c, Chart::Cdf { .. }))
        .count();
    let strips = charts
        .iter()
        .filter(|c| matches!(c, Chart::TimeSeries { .. }))
        .count();
    assert_eq!(p99.len(), groups.len(), "one p99 chart per group");
    assert_eq!(cdf, groups.len(), "one CDF per group");
    assert_eq!(strips, 4, "four strips, for the one group with intervals");

    // Each group's p99 chart: one series per configuration of the group,
    // holding exactly its measured (achieved rate, p99) points.
    for (g, chart) in groups.iter().zip(&p99) {
        let Chart::P99VsLoad { labels, series, .. } = chart else {
            unreachable!()
        };
        assert!(labels.title.ends_with(g.as_str()), "{} / {g}", labels.title);
        let members: Vec<_> = sums.iter().filter(|m| m.spec.group() == *g).collect();
        assert_eq!(series.len(), members.len());
        for (m, line) in members.iter().zip(series) {
            assert_eq!(line.label, m.spec.name);
            let want: Vec<(f64, f64)> = records
                .iter()
                .filter(|p| p.curve == m.curve)
                .filter_map(|p| p.result().map(|x| (x.achieved_rps, x.latency.p99.value)))
                .collect();
            assert!(!want.is_empty());
            assert_eq!(line.points, want);
        }
    }

    // Drawn by skq-report: one figure per chart, no figure added or lost.
    let html = model.render();
    assert_eq!(html.matches("<figure>").count(), charts.len());
    assert_eq!(model.figures(), charts.len());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn every_groups_p99_chart_is_also_written_as_its_own_svg_file() {
    let s = six_mode_sweep();
    let dir = temp_dir("report-plots");
    let records = sweep::run(&s, &dir, &mut FakeRunner::default(), &mut Quiet);
    let sums = summary::summarize(&s, &records);
    let model = output::report_model(&s, &records, &sums, &RunInfo::default());
    output::write_all(&dir, &s, &records, &sums, &RunInfo::default()).unwrap();

    let mut groups: Vec<String> = Vec::new();
    for c in &s.curves {
        if !groups.contains(&c.group()) {
            groups.push(c.group());
        }
    }
    let files = output::plot_files(&model);
    assert_eq!(files.len(), groups.len(), "one file per group");
    let mut names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), files.len(), "names are distinct");
    for (name, svg) in &files {
        assert!(name.starts_with("p99-") && name.ends_with(".svg"), "{name}");
        assert!(
            name.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-.".contains(c)),
            "{name}"
        );
        let on_disk = std::fs::read_to_string(dir.join("plots").join(name)).unwrap();
        assert_eq!(&on_disk, svg);
        assert!(svg.starts_with("<svg"), "{}", &svg[..40.min(svg.len())]);
    }
    let written = std::fs::read_dir(dir.join("plots")).unwrap().count();
    assert_eq!(written, files.len());
    std::fs::remove_dir_all(&dir).unwrap();
}
