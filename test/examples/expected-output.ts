// What the examples print: the text the model reads back. The end-to-end tests assert it and the README quotes it.

/** `explore.py` of the analysis example. */
export const EXPLORE_OUTPUT = `{'id': 'INTEGER', 'order_number': 'TEXT', 'order_date': 'TEXT', 'channel': 'TEXT', 'region': 'TEXT', 'product': 'TEXT', 'quantity': 'INTEGER', 'amount': ''}
[{'rows': 3150, 'orders': 3000, 'revenue': 262711.35}]
{'id': 1, 'order_number': 'SO-10001', 'order_date': '2024-01-01', 'channel': 'web', 'region': 'east', 'product': 'Sprocket', 'quantity': 1, 'amount': 7.8}
{'id': 2, 'order_number': 'SO-10002', 'order_date': '01/01/2024', 'channel': 'store', 'region': 'North', 'product': 'Widget', 'quantity': 2, 'amount': 39.98}
{'id': 3, 'order_number': 'SO-10003', 'order_date': '01/01/2024', 'channel': 'store', 'region': 'North', 'product': 'GADGET', 'quantity': 1, 'amount': '34.50'}
{'id': 4, 'order_number': 'SO-10004', 'order_date': '01 Jan 2024', 'channel': 'phone', 'region': ' South', 'product': 'Flux Capacitor', 'quantity': 5, 'amount': 645}
[{'type': 'real', 'rows': 2528}, {'type': 'text', 'rows': 622}]
48 spellings of region, e.g. ['  EAST  ', '  East  ', '  NORTH  ', '  North  ', '  SOUTH  ', '  South  ', '  WEST  ', '  West  ']
`;

/** `analyse.py` of the analysis example, up to its chart. */
export const SUMMARY = `3,150 rows, 150 duplicates dropped: 3,000 orders
cleaned: 48 spellings of 4 regions, 3 date formats, 622 amounts stored as text

region    orders       revenue   share
North        983     86,896.98     32%
East         774     70,892.24     26%
South        679     60,462.96     22%
West         564     55,862.49     20%
total      3,000    274,114.67

best month 2024-12: 39,007.96; weakest 2024-02: 12,371.45
second half vs first half: +28%
`;
/** The chart's lines (its size depends on matplotlib's version, so the size is a pattern). */
export const CHART_LINES =
  /^chart: revenue-by-month\.png\n\[artifact\] revenue-by-month\.png \(image\/png, \d+\.\d KiB\)\n$/;
/** The line instead of the chart where the interpreter has no matplotlib. */
export const NO_CHART_LINE = 'no chart: matplotlib is not installed for this interpreter\n';

/** `check_spec.py` of the testing example. */
export const REPORT = `ok    1. parsing amounts: 4 checks
ok    2. line totals: 3 checks
FAIL  3. discounts: 1 of 4 checks failed
      apply_discount(Decimal('0.25'), 50) returned Decimal('0.12'), expected Decimal('0.13')
ok    4. tax: 2 checks
FAIL  5. splitting: 2 of 3 checks failed
      split_evenly(Decimal('10.00'), 3) returned [Decimal('3.33'), Decimal('3.33'), Decimal('3.33')], expected [Decimal('3.34'), Decimal('3.33'), Decimal('3.33')]
      split_evenly(Decimal('0.05'), 2) returned [Decimal('0.02'), Decimal('0.02')], expected [Decimal('0.03'), Decimal('0.02')]
ok    6. formatting: 2 checks

2 of 6 features broken: 3. discounts, 5. splitting
`;
