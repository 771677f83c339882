"""Retrieval evaluation through the real bus: LoCoMo and LongMemEval protocols, baselines,
metrics and reports. Data is passed by path; nothing here is loaded by the bus itself."""
