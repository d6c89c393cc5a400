"""The run report: one self-contained HTML page per run, from a run's facts (plain JSON data).

    summary.RunSummary            `run-summary.json`, typed: the outcome, the decision, the metrics
    inputs.summarize(inputs)      the one gatherer: a run's artifacts (`inputs.ReportInputs`) → `RunSummary`, for
                                  the RunReport component and `tfxp run` (`pipeline.summary` adds ML Metadata's part)
    facts.RunFacts                what the report knows (filled by `pipeline.report.gather` for a local run's
                                  output, or by `inputs.facts_from_inputs` from the pipeline's artifacts)
    build.build_page(facts)       → `page.Page`: the sections of `page.SECTION_IDS` (run_sections, data_section,
                                  model_sections, recipe_section for the Training section's recipe and `diagnosis`;
                                  `absence` says why an output is missing)
    render.render_page(page)      → HTML: inline CSS, inline SVG plots (`plots`, matplotlib), no script, no request

`component.RunReport` is the pipeline's last component: it writes the page into its `report` artifact and next
to the pushed model (`<serving base>/reports/<version>.html`), so a Kubeflow run has its report too.
"""
