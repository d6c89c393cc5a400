"""The run report: one self-contained HTML page per run (`OUT/report.html`).

    gather.gather_facts(OUT)      run summary + ML Metadata + artifacts → `facts.RunFacts` (plain JSON data)
    build.build_page(facts)       → `page.Page`: the sections of `page.SECTION_IDS` (run_sections, model_sections)
    render.render_page(page)      → HTML: inline CSS, inline SVG plots (`plots`, matplotlib), no script, no request

`build.write_report(OUT)` does all three; `tfxp run` calls it after every run and `tfxp report OUT` for any
earlier one.
"""
