rule report:
    input:
        scores=SCORE_FILES,
        timings=TIMING_FILES,
        speeds=SPEED_FILES,
        likelihood=LIKELIHOOD_FILES,
    output:
        report(f"{REPORT_DIR}/summary.csv", category="Tables", caption="../report/summary.rst"),
        report(f"{REPORT_DIR}/table1.csv", category="Tables", caption="../report/table1.rst"),
        f"{REPORT_DIR}/table1.md",
        f"{REPORT_DIR}/table1.tex",
        f"{REPORT_DIR}/report.md",
        f"{REPORT_DIR}/provenance.json",
        [report(f"{REPORT_DIR}/{speedup_stem(b)}.png", category="Figures", caption="../report/speedup.rst")
         for b in BENCHMARKS],
        [f"{REPORT_DIR}/{speedup_stem(b)}.pdf" for b in BENCHMARKS],
        [report(f, category="Figures", caption="../report/figure1.rst") if f.endswith(".png") else f
         for f in FIGURE1_FILES],
        [
            report(f"{REPORT_DIR}/{stem}.png", category="Figures", caption="../report/figures.rst")
            for stem in PAPER_FIGURES
        ],
        [f"{REPORT_DIR}/{stem}.pdf" for stem in PAPER_FIGURES],
        [report(f, category="Tables", caption="../report/table2.rst") if f.endswith(".csv") else f for f in TABLE2_FILES],
    params:
        paper=str(PAPER_TABLE),
        bases=arg(PAPER_BASES),
        stats=arg(STATS),
        out=lambda wc, output: Path(output[0]).parent,
    log:
        f"{RUN}/logs/report.log",
    conda:
        CONDA_ENV
    shell:
        "python -m sbd_core report --scores {input.scores} --timing {input.timings} --speed {input.speeds}"
        " --likelihood {input.likelihood} --paper-table {params.paper} --paper-bases {params.bases:q}"
        " --stats {params.stats:q} --out {params.out} > {log} 2>&1"
