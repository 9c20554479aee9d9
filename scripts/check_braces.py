#!/usr/bin/env python3
"""Fails on an if/else/for/while body without braces in clang-formatted C++.

clang-format 14 cannot insert braces and clang-tidy is too slow to run on every check, so this
reads the formatted text: a braced body opens with `{` right after the condition (or `else`), on
the control line. A control line whose condition closes with nothing after it, or with a
statement after it, or an `else` followed by neither `{` nor `if`, has a braceless body.
Conditions may span lines. Comments, string and character literals (raw strings too) are blanked
first so that their contents never look like code.

Usage: check_braces.py FILE... ; prints file:line: text for each braceless body, exit 1 if any.
"""
import re
import sys

CONTROL = re.compile(r"^(?:\}\s*)?(?:else\s+)?(if|for|while)\b(?:\s+constexpr)?\s*\(")
ELSE = re.compile(r"^(?:\}\s*)?else\b(.*)$")


def blank_literals(text):
    """Comments and literals replaced by spaces (newlines kept, so line numbers stay)."""
    out = []
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            k = text.find("(", i + 2)
            delim = text[i + 2:k]
            j = text.find(")" + delim + '"', k)
            j = n if j < 0 else j + len(delim) + 2
            out.append('""' + re.sub(r"[^\n]", " ", text[i + 2:j]))
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():
                out.append(c)  # a digit separator such as 250'000
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * max(0, j - i - 2) + (c if j - i >= 2 else ""))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def check(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = blank_literals(f.read()).split("\n")
    problems = []
    for number, raw in enumerate(lines):
        line = raw.strip()
        if line.startswith("#"):
            continue
        match = CONTROL.match(line)
        if match:
            if match.group(1) == "while" and line.startswith("}"):
                continue  # the end of a do-while
            # Find the parenthesis that closes the condition, across lines if need be.
            depth = 0
            row, col = number, raw.index("(", raw.index(match.group(1)))
            rest = None
            while row < len(lines):
                text = lines[row]
                while col < len(text):
                    if text[col] == "(":
                        depth += 1
                    elif text[col] == ")":
                        depth -= 1
                        if depth == 0:
                            rest = text[col + 1:].strip()
                            break
                    col += 1
                if rest is not None:
                    break
                row, col = row + 1, 0
            if rest is None:
                continue
            if rest.startswith("{"):
                continue
            if rest == "" and row + 1 < len(lines) and lines[row + 1].strip().startswith("{"):
                continue
            if rest == ";" and match.group(1) == "while":
                continue
            problems.append((number + 1, raw.strip()))
            continue
        match = ELSE.match(line)
        if match:
            rest = match.group(1).strip()
            if rest.startswith("{") or rest.startswith("if"):
                continue
            if rest == "" and number + 1 < len(lines) and lines[number + 1].strip().startswith("{"):
                continue
            problems.append((number + 1, raw.strip()))
    return problems


def main(paths):
    found = 0
    for path in paths:
        for number, text in check(path):
            print(f"{path}:{number}: braceless body: {text}")
            found += 1
    if found:
        print(f"check_braces: {found} braceless if/else/for/while bodies; add braces", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
