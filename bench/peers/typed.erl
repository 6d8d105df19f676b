%% Erlang/BEAM peer of the typed-call table: the same two calls as the
%% typed key-value store's, as message round trips to a server process.
%%   erl -noshell -pa DIR -run typed main N -s init stop
%%
%%   small  {set, Key, Value}: the server keeps the pair in its map and
%%          answers the number of keys
%%   list   {reverse, Words}: 100 four-byte binaries, each copied to the
%%          server's heap and back; the server answers them reversed
%% Each runs twice, the second timed (ipc:time/3); "<name> <ns per op>".
-module(typed).
-export([main/1]).

main([NArg]) ->
    N = list_to_integer(NArg),
    Server = spawn(fun() -> serve(#{}) end),
    Words = [<<"word">> || _ <- lists:seq(1, 100)],
    ipc:time(small, N, fun(K) -> loop(Server, {set, <<"key">>, <<"value">>}, K) end),
    ipc:time(list, N, fun(K) -> loop(Server, {reverse, Words}, K) end),
    exit(Server, kill).

loop(_, _, 0) -> ok;
loop(Server, Msg, K) ->
    Server ! {self(), Msg},
    receive {reply, _} -> ok end,
    loop(Server, Msg, K - 1).

serve(Map) ->
    receive
        {From, {set, Key, Value}} ->
            Next = Map#{Key => Value},
            From ! {reply, map_size(Next)},
            serve(Next);
        {From, {reverse, Words}} ->
            From ! {reply, [rev(W) || W <- Words]},
            serve(Map)
    end.

rev(B) -> list_to_binary(lists:reverse(binary_to_list(B))).
