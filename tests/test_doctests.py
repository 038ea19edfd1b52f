"""The ``Examples`` of the public API run as doctests, and every public function has one.

The public API is what a notebook user calls: the names exported by ``fairspark``,
``fairspark.metrics`` and ``fairspark.notebook``. The examples that need Spark use the
session of the test run, given to them as ``spark``.
"""

from __future__ import annotations

import doctest
import importlib
import inspect

import pytest

#: the modules whose docstrings hold the public API's examples (and a few helpers')
MODULES = (
    "fairspark.config",
    "fairspark.config_model",
    "fairspark.errors",
    "fairspark.notebook",
    "fairspark.metrics._core",
    "fairspark.metrics._intervals",
    "fairspark.metrics._paired",
    "fairspark.metrics._spark",
    "fairspark.columns",
    "fairspark.session",
)
#: the packages whose ``__all__`` is the public API
PUBLIC = ("fairspark", "fairspark.metrics", "fairspark.notebook")
#: the option flags every example runs with
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _public_objects():
    for package in PUBLIC:
        mod = importlib.import_module(package)
        for name in mod.__all__:
            obj = getattr(mod, name)
            # constants and the TypedDict of audit()'s keywords document no call; an
            # exception class is shown by its base's example (FairsparkInputError)
            if not (inspect.isfunction(obj) or inspect.isclass(obj)):
                continue
            if inspect.isclass(obj) and (issubclass(obj, BaseException)
                                         or obj.__name__ == "AuditOptions"):
                continue
            yield f"{package}.{name}", obj


def test_every_public_function_and_class_has_an_example():
    missing = [name for name, obj in _public_objects()
               if ">>> " not in (inspect.getdoc(obj) or "")
               or "Examples\n--------" not in (inspect.getdoc(obj) or "")]
    assert not missing, f"public names without a numpydoc Examples section: {missing}"


def test_the_example_modules_hold_every_public_example():
    modules = {obj.__module__ for _, obj in _public_objects()}
    assert modules <= set(MODULES), sorted(modules - set(MODULES))


@pytest.mark.parametrize("name", MODULES)
def test_examples_run(name, spark):
    """Every example of ``name`` gives the output its docstring shows."""
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    report: list[str] = []
    tests = finder.find(module, name, globs={**vars(module), "spark": spark})
    for test in sorted(tests, key=lambda t: t.name):
        runner.run(test, out=report.append)
    result = runner.summarize(verbose=False)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0, "".join(report)
