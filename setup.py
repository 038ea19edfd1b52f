"""Packaging for fairspark: fairness audits of ML classifiers on Spark tables."""

from __future__ import annotations

import re
from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).parent
VERSION = re.search(
    r'^__version__ = "([^"]+)"', (HERE / "fairspark" / "_version.py").read_text(), re.M
).group(1)

setup(
    name="fairspark",
    version=VERSION,
    description="Fairness audits of ML classifiers on warehouse-scale Spark tables",
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["fairspark", "fairspark.*"]),
    package_data={
        "fairspark": [
            "data/*.gz", "data/*.md", "data/*.names", "report/templates/*.j2", "conf/*.yaml",
            "conf/*.properties",
            "*/templates/*.j2",
        ],
    },
    include_package_data=True,
    install_requires=[
        "pyspark>=4.0,<5",
        "numpy>=1.24",
        "pandas>=2.0,<3",
        "pyarrow>=11",
        "scikit-learn>=1.3",
        # imported at run time (mdfa's null and balance tests, correlation's estimates,
        # HFM's discriminative risk), not only by the tests
        "scipy>=1.10",
        "lightgbm>=4.0",
        # torch is pinned by the install commands (README, .ci/run) to the CPU build
        # on disk *before* this package is installed; this range is satisfied by it.
        "torch>=2.1",
        "matplotlib>=3.7",
        "jinja2>=3.1",
        "pyyaml>=6",
        "pydantic>=2.5",
    ],
    extras_require={
        # a Spark Connect client session (Databricks serverless/shared, Spark 4's client)
        "connect": [
            "grpcio>=1.48",
            "grpcio-status>=1.48",
            "googleapis-common-protos>=1.56",
            "zstandard>=0.23",
        ],
        # registered models as decisions (columns.*.model_uri: mlflow.pyfunc.spark_udf)
        # and output.mlflow (tracking, the sqlite model registry): the full package,
        # mlflow-skinny lacks the sqlite store's dependencies (sqlalchemy, alembic)
        "mlflow": ["mlflow>=3"],
        "dev": [
            "pytest>=7",
            "chispa>=0.10",
            "fairlearn>=0.10",
            "ruff>=0.4",
            "venv-pack>=0.2",
            "build>=1.0",
            "selenium>=4.10",
        ],
    },
    entry_points={"console_scripts": ["fairspark=fairspark.cli:console_main"]},
)
