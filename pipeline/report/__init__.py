"""The run report of a local run: `OUT/report.html`, with what ML Metadata knows (timeline, history).

    gather.gather_facts(OUT)      run summary + ML Metadata + artifacts → `components.report.facts.RunFacts`
    build.write_report(OUT)       → `components.report.build.report_html(facts)` → `OUT/report.html`

The page itself (sections, plots, HTML) lives in `components.report`, which the pipeline's RunReport component
shares; `tfxp run` calls `write_report` after every run and `tfxp report OUT` for any earlier one.
"""
