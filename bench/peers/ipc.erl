%% Erlang/BEAM peer: process spawn and message round trips, one
%% "<name> <ns per op>" line each.
%%   erl -noshell -pa DIR -run ipc main N -s init stop
%%
%%   spawn      spawn a process and receive its first message (the time
%%              until the new process runs), then it exits
%%   spawn_batch  K processes spawned, then their K messages received
%%   msg_null, msg_int3, msg_str100
%%              a round trip to a server process: an atom, a tuple of three
%%              integers (the server sums them), a 100-character string, a
%%              list that is copied between the process heaps (the server
%%              returns its length)
%% Each measure runs twice and reports the second run.
-module(ipc).
%% time/3, call_loop/3 and serve/0 are shared with dist.erl.
-export([main/1, time/3, call_loop/3, serve/0]).

main([NArg]) ->
    N = list_to_integer(NArg),
    time(spawn, max(N div 10, 100), fun spawn_loop/1),
    time(spawn_batch, max(N div 10, 100), fun spawn_batch/1),
    Server = spawn(fun serve/0),
    Str = lists:duplicate(100, $x),
    time(msg_null, N, fun(K) -> call_loop(Server, ping, K) end),
    time(msg_int3, N, fun(K) -> call_loop(Server, {1, 2, 3}, K) end),
    time(msg_str100, N, fun(K) -> call_loop(Server, Str, K) end),
    exit(Server, kill).

time(Name, N, F) ->
    F(N),
    T0 = erlang:monotonic_time(nanosecond),
    F(N),
    T1 = erlang:monotonic_time(nanosecond),
    io:format("~s ~.2f~n", [Name, (T1 - T0) / N]).

spawn_loop(0) -> ok;
spawn_loop(K) ->
    Self = self(),
    spawn(fun() -> Self ! started end),
    receive started -> ok end,
    spawn_loop(K - 1).

spawn_batch(K) ->
    Self = self(),
    [spawn(fun() -> Self ! started end) || _ <- lists:seq(1, K)],
    receive_n(K).

receive_n(0) -> ok;
receive_n(K) ->
    receive started -> ok end,
    receive_n(K - 1).

call_loop(_, _, 0) -> ok;
call_loop(Server, Msg, K) ->
    Server ! {self(), Msg},
    receive {reply, _} -> ok end,
    call_loop(Server, Msg, K - 1).

serve() ->
    receive
        {From, {A, B, C}} -> From ! {reply, A + B + C};
        {From, L} when is_list(L) -> From ! {reply, length(L)};
        {From, _} -> From ! {reply, ok}
    end,
    serve().
