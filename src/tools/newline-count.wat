(module
  (memory (export "memory") 4 4)
  ;; Newline bytes (0x0a) in memory[start, start + length).
  (func (export "countNewlines") (param $start i32) (param $length i32) (result i32)
    (local $end i32) (local $vectorEnd i32) (local $blockEnd i32) (local $sums v128) (local $total i32)
    (local.set $end (i32.add (local.get $start) (local.get $length)))
    (local.set $vectorEnd (i32.sub (local.get $end) (i32.and (local.get $length) (i32.const 15))))
    (block $vectorsDone
      (loop $blocks
        (br_if $vectorsDone (i32.ge_u (local.get $start) (local.get $vectorEnd)))
        ;; At most 255 vectors per block: each lane of $sums counts up to 255.
        (local.set $blockEnd (i32.add (local.get $start) (i32.const 4080)))
        (if (i32.gt_u (local.get $blockEnd) (local.get $vectorEnd)) (then (local.set $blockEnd (local.get $vectorEnd))))
        (local.set $sums (v128.const i64x2 0 0))
        (loop $vectors
          ;; eq gives -1 in each matching lane: subtracting it adds one.
          (local.set $sums (i8x16.sub (local.get $sums)
            (i8x16.eq (v128.load (local.get $start)) (v128.const i8x16 10 10 10 10 10 10 10 10 10 10 10 10 10 10 10 10))))
          (local.set $start (i32.add (local.get $start) (i32.const 16)))
          (br_if $vectors (i32.lt_u (local.get $start) (local.get $blockEnd))))
        (local.set $sums (i32x4.extadd_pairwise_i16x8_u (i16x8.extadd_pairwise_i8x16_u (local.get $sums))))
        (local.set $total (i32.add (local.get $total)
          (i32.add (i32.add (i32x4.extract_lane 0 (local.get $sums)) (i32x4.extract_lane 1 (local.get $sums)))
                   (i32.add (i32x4.extract_lane 2 (local.get $sums)) (i32x4.extract_lane 3 (local.get $sums))))))
        (br $blocks)))
    (block $bytesDone
      (loop $bytes
        (br_if $bytesDone (i32.ge_u (local.get $start) (local.get $end)))
        (local.set $total (i32.add (local.get $total) (i32.eq (i32.load8_u (local.get $start)) (i32.const 10))))
        (local.set $start (i32.add (local.get $start) (i32.const 1)))
        (br $bytes)))
    (local.get $total)))
