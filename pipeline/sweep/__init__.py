"""The sweep: spec, plan, batches, workers, shards and the sweep folder."""
