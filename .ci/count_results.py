#!/usr/bin/env python3
"""What .ci/run counts: the Python package's JUnit report and each build folder's
meson-logs/testlog.json. Prints "PASSED FAILED SKIPPED", three integers, on stdout.

A missing report counts as one failure ("missing" on stderr): a step that never wrote one never
ran its tests. A report that cannot be read (truncated XML, a bad number, a line of testlog.json
that is not a test result) counts as one failure too, named on stderr after "counting failed:",
and everything else is still counted, so one bad file neither hides the rest nor passes.

Usage: count_results.py PYTEST_XML BUILD_FOLDER...
"""
import json
import os
import sys
import xml.etree.ElementTree as ElementTree


def count_junit(report, counts):
    if not os.path.exists(report):
        print(f"{report}: missing", file=sys.stderr)
        counts["fail"] += 1
        return
    try:
        root = ElementTree.parse(report).getroot()
        found = {"pass": 0, "fail": 0, "skip": 0}
        for suite in ([root] if root.tag == "testsuite" else root.iter("testsuite")):
            total, skip = int(suite.get("tests", 0)), int(suite.get("skipped", 0))
            fail = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
            if min(total, skip, fail) < 0 or skip + fail > total:
                raise ValueError(f"suite {suite.get('name')!r}: {total} tests, {skip} skipped, {fail} failed")
            found["pass"] += total - skip - fail
            found["fail"] += fail
            found["skip"] += skip
    except (ElementTree.ParseError, ValueError, OSError) as error:
        # Why nothing of this report is kept: a suite counted before the bad one may be half of it.
        print(f"counting failed: {report}: {error}", file=sys.stderr)
        counts["fail"] += 1
        return
    for key, value in found.items():
        counts[key] += value


def count_testlog(folder, counts):
    log = os.path.join(folder, "meson-logs", "testlog.json")
    if not os.path.exists(log):
        print(f"{log}: missing", file=sys.stderr)
        counts["fail"] += 1
        return
    try:
        with open(log, encoding="utf-8", errors="replace") as lines:
            numbered = list(enumerate(lines, 1))
    except OSError as error:
        print(f"counting failed: {log}: {error}", file=sys.stderr)
        counts["fail"] += 1
        return
    # Why line by line: Meson writes one test per line, so a truncated or garbled line is one test
    # whose result is unknown (a failure) and the lines around it still count.
    for number, line in numbered:
        line = line.strip()
        if not line:
            continue
        try:
            result = json.loads(line)["result"]
            if not isinstance(result, str):
                raise TypeError(f"result {result!r} is not a string")
        except (ValueError, KeyError, TypeError) as error:
            print(f"counting failed: {log}:{number}: {type(error).__name__}: {error}", file=sys.stderr)
            counts["fail"] += 1
            continue
        if result in ("OK", "EXPECTEDFAIL"):
            counts["pass"] += 1
        elif result == "SKIP":
            counts["skip"] += 1
        else:
            counts["fail"] += 1


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    counts = {"pass": 0, "fail": 0, "skip": 0}
    count_junit(argv[1], counts)
    for folder in argv[2:]:
        count_testlog(folder, counts)
    print(counts["pass"], counts["fail"], counts["skip"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
