"""The measuring instrument: arms (collections + judgments), metrics, peers, speed and quality scripts.

bench imports engine and kernels; nothing in engine, kernels or enrich imports bench.
"""
