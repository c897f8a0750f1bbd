# workloads.gp — per workload, median µs per step of each way of running it (log scale):
# a clustered bar chart. Driven by scripts/plot-bench.py, which writes `data` (a header row of
# quoted series names, then one row per workload, "?" where a figure is missing) and sets:
#   data, out, term (pngcairo or png), title, note (a second title line, may be ""),
#   nseries (series columns after the label), colors (one colour per series, space-separated),
#   nrows (workload rows): the plot widens with them, so that the labels of a bench run in
#   several modes (27 rows and more) do not overlap
set encoding utf8
width = (nrows * 44 + 360 > 1200) ? nrows * 44 + 360 : 1200
set terminal @term size width,680 font "Sans,11"
set output out
set datafile missing "?"
set title (note eq "" ? title : title . "\n" . note) noenhanced
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.9 border -1
set boxwidth 0.9
set logscale y
set ylabel "µs per step (median, log scale)"
set grid ytics mytics
set xtics rotate by 45 right nomirror font ",10"
set key outside right top vertical Left reverse noenhanced
set yrange [*:*]
plot for [i=2:nseries+1] data using i:xtic(1) title columnheader(i) linecolor rgb word(colors, i-1)
