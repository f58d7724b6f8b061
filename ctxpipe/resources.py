"""The data files ctxpipe reads at run time: the SQL migrations and named queries (`sql/`) and
the prompt templates (`prompts/`).

Both stay at the top of the repository; the wheel ships them inside the package, as
`ctxpipe/_resources/sql` and `ctxpipe/_resources/prompts`, and they are found with
`importlib.resources`. A source checkout (an editable install, or the tree on `PYTHONPATH`) has
no `_resources`: there the top-level directories next to the `ctxpipe` package are used.
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Literal

ResourceName = Literal["sql", "prompts"]


class ResourceNotFoundError(FileNotFoundError):
    """Neither the installed package nor a source checkout holds the directory."""


def resource_dir(name: ResourceName) -> Path:
    """The directory `name` (`sql` or `prompts`) of the installed package or source checkout."""
    return locate(resources.files("ctxpipe"), name)


def locate(package: Traversable, name: ResourceName) -> Path:
    """`name` as shipped inside `package` (the ctxpipe package's directory), else beside it."""
    shipped = package.joinpath("_resources", name)
    if shipped.is_dir():
        # installed from a wheel: a directory of site-packages (wheels install unpacked)
        return Path(str(shipped))
    checkout = Path(str(package)).parent / name
    if checkout.is_dir():
        return checkout
    raise ResourceNotFoundError(
        f"cannot find the {name}/ directory: not shipped in the ctxpipe package "
        f"({shipped}) and no source checkout beside it ({checkout})"
    )


__all__ = ["ResourceName", "ResourceNotFoundError", "locate", "resource_dir"]
