# hand-made: two dimensions, unequal lengths, labels
@problemName tiny
@timeStamps false
@missing false
@univariate false
@dimensions 2
@equalLength false
@classLabel true a b
@data
1.5,-2,3e2:0.25,0.5,1:a
7,8:9,-1e-3:b
