"""caf_agent_data: task sets (readers, identity), seed crawl, combinatorial construction,
execution filtering, decontamination and the pipeline that chains them. See datasets/README.md."""

#: Version of the JSONL manifest this package writes (manifest.py); bump on a breaking change.
MANIFEST_VERSION = 1
