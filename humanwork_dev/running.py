"""What every helper that runs beside a test shares (the fakes, the fault proxy,
PostgreSQL): `with Helper(...) as helper:` starts it and stops it at the end."""

from __future__ import annotations

from typing import Self


class Running:
    """A helper with `start` and `stop`, used as a context manager."""

    def start(self) -> object:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()
