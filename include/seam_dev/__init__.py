"""Seam's development stack, not the product: the embedded services (``stack``), the demo schema and its
writer (``demo``), and a small client of Airflow's REST API (``airflow_api``) for ``seam trigger``, the demo
and the tests. The product (``seam``) never imports this package at module level; its CLI uses it for the
stack commands (``seam up|down|status|env|seed|writer|trigger``) when it is there.

Delivery guarantee: none (process management and test data).
"""
