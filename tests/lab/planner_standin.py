"""A stand-in planning agent for `orchard plan` tests (no model service is reachable here).

    planner_standin.py PROMPT_FILE ANSWER_FILE

Reads the planning prompt, finds the output path it names, and writes the
prepared ANSWER_FILE there (nothing when ANSWER_FILE does not exist). An
answer whose first line is `# exit N` makes it end with exit code N.
"""

import re
import sys
from pathlib import Path

prompt = Path(sys.argv[1]).read_text(encoding="utf-8")
match = re.search(r"hypotheses to `([^`]+)`", prompt)
if match is None:
    sys.exit("the prompt names no output file")
answer = Path(sys.argv[2])
if answer.exists():
    text = answer.read_text(encoding="utf-8")
    Path(match.group(1)).write_text(text, encoding="utf-8")
    first = text.splitlines()[0] if text else ""
    if first.startswith("# exit "):
        sys.exit(int(first.removeprefix("# exit ")))
print(f"planned into {match.group(1)}")
