# chain.gp — the chain sweep: µs per kernel against N kernels per step, for each way of running
# the step (log-log). Driven by scripts/plot-bench.py, which writes `data` (a header row of quoted
# series names, then one row per N: N and µs per kernel, "?" where a figure is missing) and sets:
#   data, out, term (pngcairo or png), title, note (a second title line, may be ""),
#   nseries (series columns after N), colors (one colour per series, space-separated)
set encoding utf8
set terminal @term size 1000,600 font "Sans,11"
set output out
set datafile missing "?"
set title (note eq "" ? title : title . "\n" . note) noenhanced
set logscale xy
set xlabel "N: kernels per step"
set ylabel "µs per kernel (median step time / N)"
set grid xtics ytics mytics
set key outside right top vertical Left reverse noenhanced
set offsets graph 0.05, graph 0.05, 0, 0
plot for [i=2:nseries+1] data using 1:i title columnheader(i) with linespoints lw 2 pt 7 ps 1.2 \
     linecolor rgb word(colors, i-1)
