"""Money on an invoice: parsing, line totals, discounts, tax, splitting and formatting (see SPEC.md)."""
from .amounts import format_amount, parse_amount
from .pricing import add_tax, apply_discount, line_total, split_evenly

__all__ = ["add_tax", "apply_discount", "format_amount", "line_total", "parse_amount", "split_evenly"]
