"""Platform control: install, start, inspect and stop the local platform.

``python -m platformctl up|status|logs|down|install|demo`` (or ``make up`` ...).
"""

__all__ = [
    "airflow_rest",
    "airflow_venv",
    "cli",
    "demo",
    "demo_site",
    "install",
    "platform",
    "process",
    "services",
]
