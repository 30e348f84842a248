"""Platform control: install, start, inspect and stop the local platform.

``python -m platformctl up|status|logs|down|install|demo`` (or ``make up`` ...).
"""

__all__ = ["airflow", "cli", "install", "platform", "process"]
