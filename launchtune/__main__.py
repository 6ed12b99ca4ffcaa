from launchtune.pipeline.cli import run

run()
