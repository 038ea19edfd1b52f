"""Fail early, with a clear message, when Java is missing or too old for Spark 4."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

from fairspark.errors import JavaVersionError

MIN_JAVA = 17


def java_major_version() -> int:
    """The major version of the ``java`` that Spark will start (JAVA_HOME first)."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        raise JavaVersionError(
            f"Java {MIN_JAVA} or newer is needed by Spark 4 but no 'java' was found "
            "(install a JDK 17+, e.g. 'apt-get install openjdk-17-jre-headless', or set JAVA_HOME)"
        )
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise JavaVersionError(f"could not run {java!r} -version: {err}") from None
    text = out.stderr + out.stdout
    m = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if not m:
        raise JavaVersionError(f"could not read the Java version from {java!r}: {text.strip()!r}")
    major = int(m.group(1))
    if major == 1 and m.group(2):  # "1.8.0_x" style
        major = int(m.group(2))
    return major


def check_java() -> int:
    """Raise :class:`JavaVersionError` unless Java 17+ is available; return its version."""
    major = java_major_version()
    if major < MIN_JAVA:
        raise JavaVersionError(
            f"Spark 4 needs Java {MIN_JAVA} or newer, found Java {major}; install a newer JDK "
            "or point JAVA_HOME at one"
        )
    return major
