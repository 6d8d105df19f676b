%% Erlang/BEAM peer of the copies table: N processes, each started once the
%% one before has said it is ready (as each Warden task prints "ready"), all
%% then waiting for a message that never comes; then "ready" on stdout, and
%% the node waits until it is killed.
%%   erl -noshell +P 1048576 -pa DIR -run copies main N
-module(copies).
-export([main/1]).

main([NArg]) ->
    start(list_to_integer(NArg)),
    io:format("ready~n"),
    receive never -> ok end.

start(0) -> ok;
start(K) ->
    Self = self(),
    spawn(fun() -> Self ! ready, receive never -> ok end end),
    receive ready -> ok end,
    start(K - 1).
