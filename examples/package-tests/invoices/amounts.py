"""Reading and writing amounts."""
import re
from decimal import ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")
_AMOUNT = re.compile(r"\$?(\d{1,3}(,\d{3})*|\d+)(\.\d+)?")


def to_cents(amount):
    """The amount rounded to cents, half up."""
    return amount.quantize(CENT, rounding=ROUND_HALF_UP)


def parse_amount(text):
    """The amount written in `text` ("$1,204.50", " 45.00 "); ValueError when it is not one."""
    stripped = text.strip()
    if not _AMOUNT.fullmatch(stripped):
        raise ValueError(f"not an amount: {text!r}")
    return Decimal(stripped.lstrip("$").replace(",", ""))


def format_amount(amount):
    """The amount with two decimals and thousands separators: "-1,234.50"."""
    return f"{to_cents(amount):,.2f}"
