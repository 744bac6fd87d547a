"""New run folders claimed by one process before anything is written in them (`Claim`):
of two `jab train` started together into one folder, one trains and the other is refused
having written nothing."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

from jabcli.core.errors import JabError
from jabcli.runs.files import describe
from jabcli.runs.runs import Run


class Claim:
    """New run folders claimed by this process, until the claim ends. Each is locked
    before anything is written in it and must then hold nothing but its lock, so of two
    `jab train` started together into one folder, one trains and the other is refused
    having written nothing; and `discard` removes only what this process made."""

    def __init__(self) -> None:
        self.locks = contextlib.ExitStack()
        self.folders: list[Path] = []  # claimed, outermost first
        self.made: list[Path] = []  # created by this process, outermost first
        self.discarded = False

    def __enter__(self) -> Claim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.locks.close()
        if self.discarded:
            for folder in reversed(self.made):
                with contextlib.suppress(OSError):  # not empty: another process's since
                    folder.rmdir()

    def folder(self, path: Path, made: bool = False) -> Path:
        """Claim `path`, creating it if it is missing (`made`: the caller just did)."""
        if made:
            self.made.append(path)
        else:
            try:
                path.mkdir(parents=True)
                self.made.append(path)
            except FileExistsError:
                if not path.is_dir():
                    raise JabError(
                        f"{path} is a file; choose another --out (a new or empty folder)"
                    ) from None
            except OSError as err:
                raise JabError(f"could not create run folder {path}: {describe(err)}") from None
        self.locks.enter_context(Run(path).lock())
        if any(entry.name != ".lock" for entry in path.iterdir()):
            raise JabError(
                f"{path} already exists and is not an empty folder; choose another --out"
            )
        self.folders.append(path)
        return path

    def discard(self) -> None:
        """Remove what was written in the claimed folders but their locks; once the claim
        ends (their locks released), the folders this process made too, if still empty."""
        for folder in reversed(self.folders):
            for entry in folder.iterdir():
                if entry.name == ".lock" or entry in self.folders:
                    continue
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        entry.unlink()
        self.discarded = True
