"""The redactor of the review queue's conversation thread and of the step summaries a
client reads.

An expert deciding a step reads the conversation the task came from, but needs none of
the customer's contact or payment details to do so. `redact` replaces, in this order:

- secrets and tokens: `Bearer <token>`, JWTs (`eyJ...` with three dot-separated parts),
  provider keys (`sk-...`, `pk_live_...`, `ghp_...`, `xox?-...`, `AKIA...`),
  `password=`/`token:`/`secret=`/`api_key=` style assignments (the value is replaced),
  and any other unbroken run of 32 or more letters, digits, `_` or `-` that mixes
  letters and digits (hex digests, base64 keys) -> `[token]`;
- e-mail addresses -> `[email]`;
- payment card numbers: 13 to 19 digits, optionally grouped by spaces or dashes, that pass
  the Luhn check -> `[card]`;
- phone numbers: an optional `+`, then 7 to 15 digits, optionally grouped by spaces, dots,
  dashes or parentheses -> `[phone]`.

It is deliberately conservative on numbers: order numbers, amounts and dates (fewer than
seven digits in a group, or a dash-separated date) are left alone. `redact` is pure and
answers the redacted text and how many replacements of each kind it made.
"""

from __future__ import annotations

import re
from collections import Counter

_SECRET_ASSIGNMENT = re.compile(
    r"(?i)\b(password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|auth)"
    r"(\s*[:=]\s*)(\"[^\"]*\"|'[^']*'|\S+)"
)
_BEARER = re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}")
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}")
_PROVIDER_KEY = re.compile(
    r"\b(?:sk|pk|rk)[-_](?:live|test|proj)?[-_]?[A-Za-z0-9]{12,}"
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}"
    r"|\bxox[abprs]-[A-Za-z0-9-]{10,}"
    r"|\bAKIA[0-9A-Z]{16}\b"
)
_LONG_TOKEN = re.compile(r"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{32,}(?![A-Za-z0-9_-])")
_EMAIL = re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
_PHONE = re.compile(r"(?<![\w+])\+?\(?\d[\d\s().-]{5,}\d(?!\w)")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _luhn(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2 == 1:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def redact(text: str) -> tuple[str, Counter[str]]:
    """`text` with secrets, e-mail addresses, card numbers and phone numbers replaced
    (see the module docstring), and the count of replacements per kind."""
    counts: Counter[str] = Counter()

    def sub(kind: str, pattern: re.Pattern[str], value: str) -> str:
        def replace(match: re.Match[str]) -> str:
            counts[kind] += 1
            return f"[{kind}]"

        return pattern.sub(replace, value)

    def assignment(match: re.Match[str]) -> str:
        counts["token"] += 1
        return f"{match.group(1)}{match.group(2)}[token]"

    text = _SECRET_ASSIGNMENT.sub(assignment, text)
    text = sub("token", _BEARER, text)
    text = sub("token", _JWT, text)
    text = sub("token", _PROVIDER_KEY, text)

    def long_token(match: re.Match[str]) -> str:
        value = match.group(0)
        if any(c.isalpha() for c in value) and any(c.isdigit() for c in value):
            counts["token"] += 1
            return "[token]"
        return value

    text = _LONG_TOKEN.sub(long_token, text)
    text = sub("email", _EMAIL, text)

    def card(match: re.Match[str]) -> str:
        digits = re.sub(r"\D", "", match.group(0))
        if 13 <= len(digits) <= 19 and _luhn(digits):
            counts["card"] += 1
            return "[card]"
        return match.group(0)

    text = _CARD.sub(card, text)

    def phone(match: re.Match[str]) -> str:
        value = match.group(0)
        digits = re.sub(r"\D", "", value)
        if not 7 <= len(digits) <= 15 or _DATE.match(value.strip()):
            return value
        groups = [g for g in re.split(r"[\s().-]+", value) if g]
        if not value.startswith("+") and len(groups) == 1 and len(digits) < 9:
            return value  # a bare number of 7-8 digits: more likely an order number
        counts["phone"] += 1
        return "[phone]"

    text = _PHONE.sub(phone, text)
    return text, counts
