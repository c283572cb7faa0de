"""Line totals, discounts, tax and splitting."""
from decimal import Decimal

from .amounts import CENT, to_cents


def line_total(quantity, unit_price):
    """`quantity` times `unit_price`, rounded to cents."""
    if quantity < 1:
        raise ValueError(f"quantity must be at least 1, got {quantity}")
    return to_cents(quantity * unit_price)


def apply_discount(amount, percent):
    """The amount less `percent` per cent, rounded to cents."""
    if not 0 <= percent <= 100:
        raise ValueError(f"percent must be between 0 and 100, got {percent}")
    return round(amount * (100 - Decimal(percent)) / 100, 2)


def add_tax(amount, rate):
    """The amount plus tax at `rate` (a fraction), rounded to cents."""
    return to_cents(amount * (1 + rate))


def split_evenly(amount, parts):
    """`parts` amounts of whole cents that add up to `amount`, larger ones first."""
    if parts < 1:
        raise ValueError(f"parts must be at least 1, got {parts}")
    share = (amount / parts).quantize(CENT, rounding="ROUND_DOWN")
    return [share] * parts
