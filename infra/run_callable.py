"""The child process of a callable callback: ``python -m infra.run_callable module:function``.

Reads a JSON object on stdin and calls ``function(payload)``; an exception exits non-zero with
its traceback on stderr (the caller keeps the last line as the outcome's detail).
"""

from __future__ import annotations

import importlib
import json
import sys


def main(target: str) -> int:
    module_name, _, function_name = target.partition(":")
    function = getattr(importlib.import_module(module_name), function_name)
    function(json.load(sys.stdin))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
