#!/usr/bin/env bash
# A fake benchmark for tests/bench/run_sh_test.sh: prints a human table and
# BENCH-RESULT lines (bench/README.md) chosen by CASE.
#   fake_bench.sh good|malformed|failing|silent|slower
case $1 in
good)
    echo "fake: a human table first"
    echo 'BENCH-RESULT {"id":"fake.ratio.met","what":"a ratio that meets its goal","unit":"GB/s","figure":18,"baseline":20,"baseline_what":"plain read","metric":"ratio","value":0.9,"goal_op":">=","goal":0.8}'
    echo 'BENCH-RESULT {"id":"fake.delta.missed","what":"a delta over its goal","unit":"ns/call","figure":450,"baseline":100,"baseline_what":"untraced","metric":"delta","value":350,"goal_op":"<=","goal":100}'
    echo '  BENCH-RESULT {"id":"fake.nogoal","what":"no goal, value computed","unit":"ns/call","figure":130,"baseline":100,"metric":"delta","goal_op":"<=","goal":null}'
    ;;
slower) # the same ids, another run: for --compare
    echo 'BENCH-RESULT {"id":"fake.ratio.met","what":"a ratio that meets its goal","unit":"GB/s","figure":14,"baseline":20,"metric":"ratio","value":0.7,"goal_op":">=","goal":0.8}'
    echo 'BENCH-RESULT {"id":"fake.delta.missed","what":"a delta over its goal","unit":"ns/call","figure":150,"baseline":100,"metric":"delta","value":50,"goal_op":"<=","goal":100}'
    ;;
malformed)
    echo 'BENCH-RESULT {"id":"fake.broken","metric":"ratio",'
    echo 'BENCH-RESULT {"id":"fake.nometric","figure":1,"baseline":2,"value":0.5}'
    echo 'BENCH-RESULT {"id":"fake.badgoal","metric":"ratio","value":0.5,"goal":1}'
    echo 'BENCH-RESULT {"id":"fake.survivor","what":"the good line among bad ones","unit":"x","figure":1,"baseline":1,"metric":"ratio","value":1.0,"goal_op":"<=","goal":1.02}'
    ;;
failing)
    echo 'BENCH-RESULT {"id":"fake.before.crash","metric":"ratio","value":1.0,"goal_op":"<=","goal":2}'
    echo "fake: something broke" >&2
    exit 3
    ;;
silent)
    echo "fake: ran, printed no result"
    ;;
esac
